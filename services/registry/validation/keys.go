package validation

import (
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
)

// File names in the platform key directory.
const (
	SigningKeyFile   = "platform-signing.key" // ECDSA P-256, PKCS #8 PEM, 0600
	SigningPubFile   = "platform-signing.pub" // PKIX PEM: verifies countersignatures
	RecipientKeyFile = "platform-seal.key"    // X25519, PEM, 0600
	RecipientPubFile = "platform-seal.pub"    // PEM: ISVs seal to it (hdk seal --recipient)
)

// PlatformKeys are the registry's own keys: Signing countersigns validated
// images, Recipient unwraps the data keys ISVs sealed for the registry.
type PlatformKeys struct {
	Signing   *ecdsa.PrivateKey
	Recipient *ecdh.PrivateKey
}

// LoadPlatformKeys reads the platform keys from dir, creating the directory
// (0700) and any missing key pair (private key 0600, public key 0644). Two
// processes creating the same key at once agree on one: a key file is
// created exclusively and the loser reads the winner's.
func LoadPlatformKeys(dir string) (PlatformKeys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return PlatformKeys{}, fmt.Errorf("validation: platform key directory: %w", err)
	}
	var k PlatformKeys
	b, err := loadOrCreate(filepath.Join(dir, SigningKeyFile), func() ([]byte, error) {
		key, err := sign.GenerateKey()
		if err != nil {
			return nil, err
		}
		return sign.MarshalPrivateKey(key)
	})
	if err != nil {
		return PlatformKeys{}, err
	}
	if k.Signing, err = sign.LoadPrivateKey(b, nil); err != nil {
		return PlatformKeys{}, fmt.Errorf("validation: %s: %w", SigningKeyFile, err)
	}
	pub, err := sign.MarshalPublicKey(k.Signing.Public())
	if err != nil {
		return PlatformKeys{}, err
	}
	if err := writeIfMissing(filepath.Join(dir, SigningPubFile), pub); err != nil {
		return PlatformKeys{}, err
	}

	b, err = loadOrCreate(filepath.Join(dir, RecipientKeyFile), func() ([]byte, error) {
		key, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			return nil, err
		}
		return seal.MarshalPrivateKeyPEM(key)
	})
	if err != nil {
		return PlatformKeys{}, err
	}
	if k.Recipient, err = seal.ParsePrivateKeyPEM(b); err != nil {
		return PlatformKeys{}, fmt.Errorf("validation: %s: %w", RecipientKeyFile, err)
	}
	pub, err = seal.MarshalPublicKeyPEM(k.Recipient.PublicKey())
	if err != nil {
		return PlatformKeys{}, err
	}
	if err := writeIfMissing(filepath.Join(dir, RecipientPubFile), pub); err != nil {
		return PlatformKeys{}, err
	}
	return k, nil
}

func loadOrCreate(path string, gen func() ([]byte, error)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("validation: platform key: %w", err)
	}
	b, err = gen()
	if err != nil {
		return nil, fmt.Errorf("validation: generating %s: %w", filepath.Base(path), err)
	}
	if err := createExclusive(path, b, 0o600); errors.Is(err, fs.ErrExist) {
		return os.ReadFile(path)
	} else if err != nil {
		return nil, err
	}
	return b, nil
}

func writeIfMissing(path string, b []byte) error {
	if err := createExclusive(path, b, 0o644); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// createExclusive writes b to a temporary file and links it to path, so that
// path never holds a partial key and an existing path is never replaced.
func createExclusive(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return fmt.Errorf("validation: platform key: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("validation: platform key: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("validation: platform key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("validation: platform key: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("validation: platform key: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("validation: platform key: %w", err)
	}
	return nil
}
