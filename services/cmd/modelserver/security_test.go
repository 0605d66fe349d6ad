package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/modelserver"
)

// TestCheckExposure: a non-loopback address needs tokens or mTLS, or
// -insecure-no-auth; loopback addresses need nothing.
func TestCheckExposure(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("infer 0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		flags securityFlags
		addrs []string
		ok    bool
	}{
		{"loopback", securityFlags{}, []string{"127.0.0.1:8000", "[::1]:8001", "localhost:8000"}, true},
		{"every interface", securityFlags{}, []string{"127.0.0.1:8000", ":8001"}, false},
		{"a public address", securityFlags{}, []string{"10.0.0.5:8000"}, false},
		{"gRPC off", securityFlags{}, []string{"127.0.0.1:8000", ""}, true},
		{"insecure", securityFlags{insecureNoAuth: true}, []string{"0.0.0.0:8000"}, true},
		{"tokens", securityFlags{tokens: tokens}, []string{"0.0.0.0:8000"}, true},
	} {
		var cfg modelserver.Config
		_, tcfg, err := c.flags.apply(&cfg, log)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		err = c.flags.checkExposure(cfg, tcfg, log, c.addrs...)
		if (err == nil) != c.ok {
			t.Errorf("%s %v: %v", c.name, c.addrs, err)
		}
		if err != nil && (!errors.As(err, new(usageErr)) || !strings.Contains(err.Error(), "-insecure-no-auth")) {
			t.Errorf("%s: %v is not a usage error naming -insecure-no-auth", c.name, err)
		}
	}
	bad := securityFlags{clientCA: "ca.pem"}
	if _, _, err := bad.apply(&modelserver.Config{}, log); !errors.As(err, new(usageErr)) {
		t.Errorf("-client-ca without -tls-cert: %v", err)
	}
}
