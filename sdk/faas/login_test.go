package faas_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/sdk/faas"
)

// TestAgentToken: $FAAS_TOKEN wins over the stored login, which wins over
// a pod's allocation credential; with none of them the token is empty.
func TestAgentToken(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "config.json")
	t.Setenv("FAAS_CONFIG", cfg)
	for _, c := range []struct {
		env, alloc, stored, want string
	}{
		{"", "", "", ""},
		{"", "faasa_a1_s", "", "faasa_a1_s"},
		{"", "faasa_a1_s", "faas_stored", "faas_stored"},
		{"faas_env", "faasa_a1_s", "faas_stored", "faas_env"},
	} {
		t.Setenv("FAAS_TOKEN", c.env)
		t.Setenv(faas.AllocationEnv, c.alloc)
		os.Remove(cfg)
		if c.stored != "" {
			if err := os.WriteFile(cfg, []byte(`{"registry":"r","user":"u","token":"`+c.stored+`"}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		got, err := faas.AgentToken()
		if err != nil || got != c.want {
			t.Errorf("FAAS_TOKEN=%q %s=%q stored %q: %q, %v; want %q", c.env, faas.AllocationEnv, c.alloc, c.stored, got, err, c.want)
		}
	}
}
