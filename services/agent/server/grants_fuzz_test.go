package server

import (
	"strings"
	"testing"
)

const b64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

// FuzzGrantCredential: whatever a container sends as an allocation
// credential, lookup answers without panicking, and accepts exactly the
// credential issued.
func FuzzGrantCredential(f *testing.F) {
	gs := NewGrants()
	tok, err := gs.Issue(Grant{ID: "0123456789abcdef", Slots: []int{1}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok)
	f.Add(tok[:len(tok)-1] + "B")
	// The other spellings of the secret's last two bits.
	last := strings.IndexByte(b64url, tok[len(tok)-1])
	for k := range 4 {
		f.Add(tok[:len(tok)-1] + string(b64url[last&^3|k]))
	}
	f.Add(GrantPrefix)
	f.Add(GrantPrefix + "0123456789abcdef_")
	f.Add(GrantPrefix + "_" + strings.Repeat("A", 43))
	f.Add(GrantPrefix + "0123456789abcdef_" + strings.Repeat("=", 44))
	f.Add(GrantPrefix + "x_y_z")
	f.Fuzz(func(t *testing.T, s string) {
		e, err := gs.lookup(s)
		if (err == nil) != (s == tok) {
			t.Fatalf("lookup(%q): %v, %v", s, e, err)
		}
		if err == nil && !e.whole(1) {
			t.Fatalf("lookup(%q) found a grant without slot 1", s)
		}
	})
}
