package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fpga-faas/faas/internal/atomicfile"
	client "github.com/fpga-faas/faas/sdk/faas"
)

// config is what `faas login` stores: the login of one registry account,
// whose API token the other commands send to faasd.
type config struct {
	Registry string `json:"registry"`
	User     string `json:"user"`
	Token    string `json:"token"`
	TokenID  string `json:"token_id,omitempty"`
}

// configPath is $FAAS_CONFIG, or faas/config.json in the user's
// configuration directory.
func configPath() (string, error) {
	if p := os.Getenv("FAAS_CONFIG"); p != "" {
		return p, nil
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the configuration directory (set $FAAS_CONFIG): %w", err)
	}
	return filepath.Join(dir, "faas", "config.json"), nil
}

// readConfig returns the stored login, or nil when there is none.
func readConfig() (*config, error) {
	p, err := configPath()
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var c config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &c, nil
}

// writeConfig stores c atomically (a temporary file renamed over the old
// one), readable by the user only.
func writeConfig(c config) (string, error) {
	p, err := configPath()
	if err != nil {
		return "", err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// agentToken is the token the agent commands send: $FAAS_TOKEN, else the
// stored login's, else a pod's allocation credential.
func agentToken() (string, error) { return client.AgentToken() }
