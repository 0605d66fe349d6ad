package blob_test

import (
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/blob"
)

func TestParseDigest(t *testing.T) {
	s256 := sha256.Sum256([]byte("x"))
	s512 := sha512.Sum512([]byte("x"))
	good := []struct {
		s   string
		alg blob.Algorithm
	}{
		{"sha256:" + hex.EncodeToString(s256[:]), blob.SHA256},
		{"sha512:" + hex.EncodeToString(s512[:]), blob.SHA512},
	}
	for _, g := range good {
		d, err := blob.ParseDigest(g.s)
		if err != nil || string(d) != g.s || d.Algorithm() != g.alg || string(g.alg)+":"+d.Hex() != g.s {
			t.Fatalf("ParseDigest(%q) = %q, %v", g.s, d, err)
		}
		if got := g.alg.FromBytes([]byte("x")); got != d {
			t.Errorf("%s.FromBytes = %s, want %s", g.alg, got, d)
		}
		if nd, err := blob.NewDigest(g.alg, d.Hex()); err != nil || nd != d {
			t.Errorf("NewDigest(%s, …) = %s, %v", g.alg, nd, err)
		}
	}
	if blob.FromBytes([]byte("x")) != blob.Digest(good[0].s) {
		t.Error("FromBytes is not sha256")
	}
	h256, h512 := good[0].s[7:], good[1].s[7:]
	invalid := []string{
		"", ":", "sha256", "sha256:", ":" + h256, "sha256:ABC", "sha256:" + strings.ToUpper(h256),
		"sha512:" + h256, "sha256:" + h512, "sha256:" + h256 + "0", "sha256:" + h256[1:] + "g",
		"SHA256:" + h256, "sha256 :" + h256, "sha256:" + h256 + "\n", "sha256:../" + h256[3:],
		"sha256:" + strings.Repeat("a", 1000), "-sha:abc", "sha..256:abc", "sha256:a/b",
	}
	for _, s := range invalid {
		_, err := blob.ParseDigest(s)
		if !errors.Is(err, blob.ErrInvalidDigest) || errors.Is(err, blob.ErrUnsupportedDigest) {
			t.Errorf("ParseDigest(%q): %v, want ErrInvalidDigest only", s, err)
		}
	}
	// Well-formed digests of other algorithms: unsupported (and invalid).
	for _, s := range []string{"md5:d41d8cd98f00b204e9800998ecf8427e", "sha384:" + h256, "foo:bar", "sha256+b64u:LCa0a2j_xo_5m0U8HTBBNBNCLXBkg7-g-YpeiGJm564", "blake3:" + h256} {
		_, err := blob.ParseDigest(s)
		if !errors.Is(err, blob.ErrUnsupportedDigest) || !errors.Is(err, blob.ErrInvalidDigest) {
			t.Errorf("ParseDigest(%q): %v, want ErrUnsupportedDigest", s, err)
		}
	}
	for _, a := range blob.Algorithms() {
		if got, err := blob.ParseAlgorithm(string(a)); err != nil || got != a {
			t.Errorf("ParseAlgorithm(%s) = %s, %v", a, got, err)
		}
	}
	for _, s := range []string{"", "md5", "SHA256", "sha384"} {
		if _, err := blob.ParseAlgorithm(s); !errors.Is(err, blob.ErrUnsupportedDigest) {
			t.Errorf("ParseAlgorithm(%q): %v", s, err)
		}
	}
}

// FuzzParseDigest: ParseDigest never panics, and what it accepts is a
// supported algorithm and hex of the right length that round-trips.
func FuzzParseDigest(f *testing.F) {
	for _, s := range []string{"", "sha256:", string(blob.FromBytes(nil)), string(blob.SHA512.FromBytes(nil)),
		"md5:d41d8cd98f00b204e9800998ecf8427e", "sha256+b64u:abc=", "a:b:c", "sha512:" + strings.Repeat("f", 128)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := blob.ParseDigest(s)
		if err != nil {
			if !errors.Is(err, blob.ErrInvalidDigest) {
				t.Fatalf("ParseDigest(%q): %v does not wrap ErrInvalidDigest", s, err)
			}
			return
		}
		a := d.Algorithm()
		if !a.Available() || string(d) != s || string(a)+":"+d.Hex() != s {
			t.Fatalf("ParseDigest(%q) = %q (algorithm %q, hex %q)", s, d, a, d.Hex())
		}
		if _, err := hex.DecodeString(d.Hex()); err != nil || len(d.Hex()) != 2*a.New().Size() {
			t.Fatalf("ParseDigest(%q): hex part %q", s, d.Hex())
		}
	})
}

func TestCheckRange(t *testing.T) {
	for _, c := range []struct{ off, n, size, want int64 }{{0, -1, 10, 10}, {10, -1, 10, 0}, {3, 4, 10, 4}, {0, 0, 0, 0}} {
		if got, err := blob.CheckRange(c.off, c.n, c.size); err != nil || got != c.want {
			t.Errorf("CheckRange(%d, %d, %d) = %d, %v", c.off, c.n, c.size, got, err)
		}
	}
	for _, c := range []struct{ off, n, size int64 }{{-1, 1, 10}, {11, -1, 10}, {5, 6, 10}, {0, 1, 0}} {
		if _, err := blob.CheckRange(c.off, c.n, c.size); !errors.Is(err, blob.ErrInvalidRange) {
			t.Errorf("CheckRange(%d, %d, %d): %v", c.off, c.n, c.size, err)
		}
	}
}
