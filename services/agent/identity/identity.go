// Package identity is a node's identity towards the registry: its X25519
// key, to which the registry wraps the data keys it releases, and the node
// id the registry gave it at registration. Both live in the agent's state
// directory; the private key never leaves it.
package identity

import (
	"context"
	"crypto/ecdh"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/internal/atomicfile"
)

// File names in the state directory.
const (
	KeyFile  = "node.key"  // X25519 private key, PEM, 0600
	NodeFile = "node.json" // {"id": …, "registry": …}
)

// Node is a registered node.
type Node struct {
	ID       string           `json:"id"`
	Registry string           `json:"registry"`
	Key      *ecdh.PrivateKey `json:"-"`
}

// Registrar registers a node's public key and returns its id.
type Registrar interface {
	Register(ctx context.Context, hostname string, pub *ecdh.PublicKey) (string, error)
}

// Load returns the node identity in dir, creating the key and registering
// with reg (as hostname) when dir has none for this registry.
func Load(ctx context.Context, dir, registry, hostname string, reg Registrar) (Node, error) {
	key, err := loadKey(filepath.Join(dir, KeyFile))
	if err != nil {
		return Node{}, err
	}
	n := Node{Key: key}
	path := filepath.Join(dir, NodeFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &n); err != nil {
			return Node{}, fmt.Errorf("identity: %s: %v", path, err)
		}
		if n.Registry == registry && n.ID != "" {
			return n, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return Node{}, fmt.Errorf("identity: %w", err)
	}
	id, err := reg.Register(ctx, hostname, key.PublicKey())
	if err != nil {
		return Node{}, fmt.Errorf("identity: registering node %s: %w", hostname, err)
	}
	n.ID, n.Registry = id, registry
	out, _ := json.MarshalIndent(n, "", "  ")
	if err := writeFile(path, out, 0o644); err != nil {
		return Node{}, err
	}
	return n, nil
}

func loadKey(path string) (*ecdh.PrivateKey, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		k, err := seal.ParsePrivateKeyPEM(data)
		if err != nil {
			return nil, fmt.Errorf("identity: %s: %w", path, err)
		}
		return k, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("identity: %w", err)
	}
	k, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	pemBytes, err := seal.MarshalPrivateKeyPEM(k)
	if err != nil {
		return nil, err
	}
	return k, writeFile(path, pemBytes, 0o600)
}

// writeFile writes data atomically with mode perm.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.Write(path, data, perm); err != nil {
		return fmt.Errorf("identity: %w", err)
	}
	return nil
}
