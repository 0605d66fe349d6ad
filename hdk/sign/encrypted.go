package sign

import (
	"crypto/rand"
	"encoding/json"
	"fmt"

	"golang.org/x/crypto/nacl/secretbox"
	"golang.org/x/crypto/scrypt"
)

// cosign's encrypted key format is go-securesystemslib's "encrypted" envelope:
// JSON with scrypt parameters and salt, a nacl/secretbox nonce, and the
// ciphertext, []byte fields base64-encoded by encoding/json.
type envelope struct {
	KDF        kdf    `json:"kdf"`
	Cipher     cipher `json:"cipher"`
	Ciphertext []byte `json:"ciphertext"`
}

type kdf struct {
	Name   string       `json:"name"`
	Params scryptParams `json:"params"`
	Salt   []byte       `json:"salt"`
}

type scryptParams struct {
	N int `json:"N"`
	R int `json:"r"`
	P int `json:"p"`
}

type cipher struct {
	Name  string `json:"name"`
	Nonce []byte `json:"nonce"`
}

const (
	kdfScrypt       = "scrypt"
	cipherSecretbox = "nacl/secretbox"
	saltSize        = 32
	nonceSize       = 24
	boxKeySize      = 32
)

// The parameter sets go-securesystemslib accepts (legacy, standard, OWASP).
// Only these are accepted on read, which also bounds the scrypt work an
// untrusted key file can demand.
var (
	legacyParams   = scryptParams{N: 1 << 15, R: 8, P: 1}
	standardParams = scryptParams{N: 1 << 16, R: 8, P: 1}
	owaspParams    = scryptParams{N: 1 << 17, R: 8, P: 1}
)

func encrypt(plaintext, password []byte) ([]byte, error) {
	env := envelope{
		KDF:    kdf{Name: kdfScrypt, Params: standardParams, Salt: make([]byte, saltSize)},
		Cipher: cipher{Name: cipherSecretbox, Nonce: make([]byte, nonceSize)},
	}
	if _, err := rand.Read(env.KDF.Salt); err != nil {
		return nil, fmt.Errorf("sign: generating salt: %w", err)
	}
	if _, err := rand.Read(env.Cipher.Nonce); err != nil {
		return nil, fmt.Errorf("sign: generating nonce: %w", err)
	}
	key, err := env.KDF.key(password)
	if err != nil {
		return nil, err
	}
	env.Ciphertext = secretbox.Seal(nil, plaintext, (*[nonceSize]byte)(env.Cipher.Nonce), key)
	clear(key[:])
	b, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("sign: encoding encrypted key: %w", err)
	}
	return b, nil
}

func decrypt(data, password []byte) ([]byte, error) {
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("sign: decoding encrypted private key: %w", err)
	}
	if env.KDF.Name != kdfScrypt {
		return nil, fmt.Errorf("sign: encrypted private key: unsupported kdf %q", env.KDF.Name)
	}
	if env.Cipher.Name != cipherSecretbox {
		return nil, fmt.Errorf("sign: encrypted private key: unsupported cipher %q", env.Cipher.Name)
	}
	switch env.KDF.Params {
	case legacyParams, standardParams, owaspParams:
	default:
		return nil, fmt.Errorf("sign: encrypted private key: unsupported scrypt parameters N=%d r=%d p=%d",
			env.KDF.Params.N, env.KDF.Params.R, env.KDF.Params.P)
	}
	if len(env.Cipher.Nonce) != nonceSize {
		return nil, fmt.Errorf("sign: encrypted private key: nonce is %d bytes, want %d", len(env.Cipher.Nonce), nonceSize)
	}
	key, err := env.KDF.key(password)
	if err != nil {
		return nil, err
	}
	defer clear(key[:])
	plain, ok := secretbox.Open(nil, env.Ciphertext, (*[nonceSize]byte)(env.Cipher.Nonce), key)
	if !ok {
		return nil, ErrWrongPassword
	}
	return plain, nil
}

func (k kdf) key(password []byte) (*[boxKeySize]byte, error) {
	b, err := scrypt.Key(password, k.Salt, k.Params.N, k.Params.R, k.Params.P, boxKeySize)
	if err != nil {
		return nil, fmt.Errorf("sign: deriving key with scrypt: %w", err)
	}
	return (*[boxKeySize]byte)(b), nil
}
