package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// token is the registry API token faasd knows the tenant by: $FAAS_TOKEN,
// or the one `faas login` stored. A program may run without one on the
// unix socket, where faasd knows the caller by its uid.
func token() (string, error) {
	if t := os.Getenv("FAAS_TOKEN"); t != "" {
		return t, nil
	}
	p := os.Getenv("FAAS_CONFIG")
	if p == "" {
		dir, err := os.UserConfigDir()
		if err != nil {
			return "", nil
		}
		p = filepath.Join(dir, "faas", "config.json")
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var c struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return "", fmt.Errorf("%s: %w", p, err)
	}
	return c.Token, nil
}
