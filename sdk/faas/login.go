package faas

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Login is a tenant's registry login as `faas login` stores it.
type Login struct {
	Registry string `json:"registry"` // the registry's URL
	User     string `json:"user"`
	Token    string `json:"token"` // an API token, "faas_…"
}

// StoredLogin returns the login programs use by default: $FAAS_TOKEN and
// $FAAS_REGISTRY when set, over what `faas login` stored in $FAAS_CONFIG
// or faas/config.json in the user's configuration directory. A missing
// file is no error: the fields are then empty.
func StoredLogin() (Login, error) {
	var l Login
	p := os.Getenv("FAAS_CONFIG")
	if p == "" {
		if dir, err := os.UserConfigDir(); err == nil {
			p = filepath.Join(dir, "faas", "config.json")
		}
	}
	if p != "" {
		b, err := os.ReadFile(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return l, fmt.Errorf("faas: login: %w", err)
		default:
			if err := json.Unmarshal(b, &l); err != nil {
				return l, fmt.Errorf("faas: login: %s: %w", p, err)
			}
		}
	}
	if t := os.Getenv("FAAS_TOKEN"); t != "" {
		l.Token = t
	}
	if r := os.Getenv("FAAS_REGISTRY"); r != "" {
		l.Registry = r
	}
	return l, nil
}

// AllocationEnv names the variable in which the Kubernetes device plugin
// gives a container its allocation credential ("faasa_…"), which opens
// sessions on the container's allocated slots or windows only.
const AllocationEnv = "FAAS_ALLOCATION_TOKEN"

// AgentToken returns the credential programs send faasd by default: the
// stored login's token ($FAAS_TOKEN over what `faas login` stored), else
// the container's allocation credential ($FAAS_ALLOCATION_TOKEN), so that
// the faas command and SDK programs work unchanged in a pod given devices.
func AgentToken() (string, error) {
	l, err := StoredLogin()
	if err != nil {
		return "", err
	}
	return cmp.Or(l.Token, os.Getenv(AllocationEnv)), nil
}
