package webhooks_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// TestVerify: a receiver accepts what was signed, and refuses another
// body, another secret, a stale timestamp (a replay) and a timestamp
// moved without re-signing.
func TestVerify(t *testing.T) {
	const secret = "whsec_test"
	body := []byte(`{"id":"e1","type":"token.expiring","created_at":"2026-01-01T00:00:00Z","data":{}}`)
	now := time.Unix(1_800_000_000, 0)
	h := webhooks.Sign(secret, now, body)
	if !strings.HasPrefix(h, "t=1800000000,v1=") || len(h) != len("t=1800000000,v1=")+64 {
		t.Fatalf("header %q", h)
	}
	if err := webhooks.Verify(h, secret, body, 0, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	// A second signature (a secret being replaced) is accepted beside it.
	if err := webhooks.Verify(h+",v1="+strings.Repeat("0", 64), secret, body, 0, now); err != nil {
		t.Fatal(err)
	}
	moved := strings.Replace(h, "t=1800000000", "t=1800000600", 1)
	for name, c := range map[string]struct {
		header, secret string
		body           []byte
		at             time.Time
		want           error
	}{
		"another body":       {h, secret, append(body, ' '), now, webhooks.ErrSignature},
		"another secret":     {h, "whsec_other", body, now, webhooks.ErrSignature},
		"replayed later":     {h, secret, body, now.Add(webhooks.DefaultTolerance + time.Second), webhooks.ErrTimestamp},
		"from the future":    {h, secret, body, now.Add(-webhooks.DefaultTolerance - time.Second), webhooks.ErrTimestamp},
		"timestamp moved":    {moved, secret, body, now.Add(10 * time.Minute), webhooks.ErrSignature},
		"no header":          {"", secret, body, now, webhooks.ErrNoSignature},
		"no v1":              {"t=1800000000", secret, body, now, webhooks.ErrNoSignature},
		"malformed v1":       {"t=1800000000,v1=zz", secret, body, now, webhooks.ErrNoSignature},
		"malformed time":     {"t=soon,v1=" + strings.Repeat("0", 64), secret, body, now, webhooks.ErrNoSignature},
		"v0 scheme only":     {strings.Replace(h, "v1=", "v0=", 1), secret, body, now, webhooks.ErrNoSignature},
		"truncated v1 value": {h[:len(h)-2], secret, body, now, webhooks.ErrNoSignature},
	} {
		if err := webhooks.Verify(c.header, c.secret, c.body, 0, c.at); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

func TestCheckURL(t *testing.T) {
	for u, ok := range map[string][2]bool{ // without, with loopback allowed
		"https://hooks.example.com/in":                   {true, true},
		"https://hooks.example.com:8443/in":              {true, true},
		"https://93.184.216.34/in":                       {true, true},
		"http://hooks.example.com/in":                    {false, false},
		"http://127.0.0.1:8080/in":                       {false, true},
		"http://localhost:8080/in":                       {false, true},
		"http://[::1]:8080/in":                           {false, true},
		"https://127.0.0.2/in":                           {false, true},
		"https://192.168.1.1/in":                         {false, false},
		"https://172.16.0.1/in":                          {false, false},
		"https://[fe80::1]/in":                           {false, false},
		"https://[::ffff:10.0.0.1]/in":                   {false, false},
		"https://0.0.0.0/in":                             {false, false},
		"https://224.0.0.1/in":                           {false, false},
		"https://u@hooks.example.com/in":                 {false, false},
		"https://hooks.example.com/in#x":                 {false, false},
		"hooks.example.com/in":                           {false, false},
		"https://" + strings.Repeat("a", 2048) + ".com/": {false, false},
	} {
		for i, allow := range []bool{false, true} {
			err := webhooks.CheckURL(u, allow)
			if (err == nil) != ok[i] {
				t.Errorf("%s (loopback %v): %v", u, allow, err)
			}
			if err != nil && !errors.Is(err, webhooks.ErrAddress) {
				t.Errorf("%s: %v is not ErrAddress", u, err)
			}
		}
	}
}
