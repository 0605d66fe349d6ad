package sign

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
)

// PEM block types.
const (
	PrivateKeyPEMType          = "PRIVATE KEY"
	PublicKeyPEMType           = "PUBLIC KEY"
	EncryptedPrivateKeyPEMType = "ENCRYPTED SIGSTORE PRIVATE KEY"
	// legacyEncryptedPEMType is what cosign wrote before it became sigstore's
	// format; it is read, never written.
	legacyEncryptedPEMType = "ENCRYPTED COSIGN PRIVATE KEY"
)

// PasswordEnv is the environment variable cosign reads the key password from.
const PasswordEnv = "COSIGN_PASSWORD"

// ErrWrongPassword reports that an encrypted private key did not decrypt.
var ErrWrongPassword = errors.New("sign: cannot decrypt private key: wrong password or corrupted key")

// EnvPassword returns the password in $COSIGN_PASSWORD, or an error if it is
// unset. An empty but set variable is an empty password, as in cosign.
func EnvPassword() ([]byte, error) {
	pw, ok := os.LookupEnv(PasswordEnv)
	if !ok {
		return nil, fmt.Errorf("sign: %s is not set", PasswordEnv)
	}
	return []byte(pw), nil
}

// GenerateKey returns a new ECDSA P-256 key.
func GenerateKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("sign: generating key: %w", err)
	}
	return k, nil
}

// LoadPrivateKey parses a PEM private key: unencrypted PKCS #8 ("PRIVATE
// KEY") or cosign's encrypted format, whose password is obtained from
// password (which may be nil for unencrypted keys) only when needed.
func LoadPrivateKey(pemBytes []byte, password func() ([]byte, error)) (*ecdsa.PrivateKey, error) {
	block, err := decodePEM(pemBytes)
	if err != nil {
		return nil, err
	}
	der := block.Bytes
	switch block.Type {
	case PrivateKeyPEMType:
	case EncryptedPrivateKeyPEMType, legacyEncryptedPEMType:
		if password == nil {
			return nil, errors.New("sign: private key is encrypted and no password was provided")
		}
		pw, err := password()
		if err != nil {
			return nil, fmt.Errorf("sign: reading password for private key: %w", err)
		}
		if der, err = decrypt(block.Bytes, pw); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("sign: unsupported private key PEM type %q", block.Type)
	}
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("sign: parsing PKCS #8 private key: %w", err)
	}
	ek, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("sign: private key is %T, want ECDSA P-256", k)
	}
	if err := checkCurve(&ek.PublicKey); err != nil {
		return nil, fmt.Errorf("sign: private key: %w", err)
	}
	return ek, nil
}

// LoadPublicKey parses a PKIX PEM ("PUBLIC KEY") ECDSA P-256 public key, as
// written by cosign generate-key-pair.
func LoadPublicKey(pemBytes []byte) (*ecdsa.PublicKey, error) {
	block, err := decodePEM(pemBytes)
	if err != nil {
		return nil, err
	}
	if block.Type != PublicKeyPEMType {
		return nil, fmt.Errorf("sign: unsupported public key PEM type %q", block.Type)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("sign: parsing PKIX public key: %w", err)
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("sign: public key is %T, want ECDSA P-256", k)
	}
	if err := checkCurve(ek); err != nil {
		return nil, fmt.Errorf("sign: public key: %w", err)
	}
	return ek, nil
}

// MarshalPrivateKey encodes key as unencrypted PKCS #8 PEM.
func MarshalPrivateKey(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sign: encoding private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PrivateKeyPEMType, Bytes: der}), nil
}

// MarshalEncryptedPrivateKey encodes key in cosign's encrypted format
// (what cosign generate-key-pair writes to cosign.key), under password.
func MarshalEncryptedPrivateKey(key *ecdsa.PrivateKey, password []byte) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("sign: encoding private key: %w", err)
	}
	enc, err := encrypt(der, password)
	clear(der)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: EncryptedPrivateKeyPEMType, Bytes: enc}), nil
}

// MarshalPublicKey encodes key as PKIX PEM.
func MarshalPublicKey(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("sign: encoding public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: PublicKeyPEMType, Bytes: der}), nil
}

// Fingerprint identifies a public key in messages: "SHA256:" and the
// unpadded base64 SHA-256 of its PKIX DER encoding.
func Fingerprint(key crypto.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return "", fmt.Errorf("sign: encoding public key: %w", err)
	}
	sum := sha256.Sum256(der)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:]), nil
}

func decodePEM(b []byte) (*pem.Block, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, errors.New("sign: no PEM block found")
	}
	return block, nil
}

// checkCurve accepts P-256 only: it is what cosign generates and what the
// platform registers for ISVs.
func checkCurve(k *ecdsa.PublicKey) error {
	if k.Curve != elliptic.P256() {
		return fmt.Errorf("ECDSA key on curve %s, want P-256", k.Curve.Params().Name)
	}
	return nil
}
