package sign

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
)

func TestPlainKeyRoundTrip(t *testing.T) {
	key := newKey(t)
	privPEM, err := MarshalPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(privPEM), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("private key PEM starts %q", privPEM[:30])
	}
	got, err := LoadPrivateKey(privPEM, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(key) {
		t.Error("private key changed in round trip")
	}
	pubPEM, err := MarshalPublicKey(key.Public())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pubPEM), "-----BEGIN PUBLIC KEY-----") {
		t.Errorf("public key PEM starts %q", pubPEM[:30])
	}
	pub, err := LoadPublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(key.Public()) {
		t.Error("public key changed in round trip")
	}
}

func TestEncryptedKeyRoundTrip(t *testing.T) {
	key := newKey(t)
	enc, err := MarshalEncryptedPrivateKey(key, []byte("correct horse"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(enc)
	if block == nil || block.Type != "ENCRYPTED SIGSTORE PRIVATE KEY" {
		t.Fatalf("encrypted key PEM = %q", enc)
	}
	for _, field := range []string{`"kdf":{"name":"scrypt","params":{"N":65536,"r":8,"p":1},"salt":"`, `"cipher":{"name":"nacl/secretbox","nonce":"`, `"ciphertext":"`} {
		if !strings.Contains(string(block.Bytes), field) {
			t.Errorf("envelope %s lacks %s", block.Bytes, field)
		}
	}
	got, err := LoadPrivateKey(enc, func() ([]byte, error) { return []byte("correct horse"), nil })
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(key) {
		t.Error("private key changed in round trip")
	}

	_, err = LoadPrivateKey(enc, func() ([]byte, error) { return []byte("wrong horse"), nil })
	if !errors.Is(err, ErrWrongPassword) || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("LoadPrivateKey with wrong password = %v, want ErrWrongPassword", err)
	}
	if _, err := LoadPrivateKey(enc, nil); err == nil {
		t.Error("LoadPrivateKey of an encrypted key without password succeeded")
	}
	legacy := pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED COSIGN PRIVATE KEY", Bytes: block.Bytes})
	if _, err := LoadPrivateKey(legacy, func() ([]byte, error) { return []byte("correct horse"), nil }); err != nil {
		t.Errorf("LoadPrivateKey(ENCRYPTED COSIGN PRIVATE KEY): %v", err)
	}
	t.Setenv(PasswordEnv, "correct horse")
	if _, err := LoadPrivateKey(enc, EnvPassword); err != nil {
		t.Errorf("LoadPrivateKey with %s: %v", PasswordEnv, err)
	}
}

func TestEncryptedKeyRejectsBadEnvelope(t *testing.T) {
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	for _, body := range []string{
		`not json`,
		`{"kdf":{"name":"pbkdf2","params":{"N":65536,"r":8,"p":1}},"cipher":{"name":"nacl/secretbox"}}`,
		`{"kdf":{"name":"scrypt","params":{"N":1073741824,"r":8,"p":1}},"cipher":{"name":"nacl/secretbox"}}`,
		`{"kdf":{"name":"scrypt","params":{"N":65536,"r":8,"p":1}},"cipher":{"name":"aes"}}`,
		`{"kdf":{"name":"scrypt","params":{"N":32768,"r":8,"p":1}},"cipher":{"name":"nacl/secretbox","nonce":"AAAA"}}`,
	} {
		b := pem.EncodeToMemory(&pem.Block{Type: EncryptedPrivateKeyPEMType, Bytes: []byte(body)})
		if _, err := LoadPrivateKey(b, pw); err == nil || errors.Is(err, ErrWrongPassword) {
			t.Errorf("LoadPrivateKey(%s) = %v, want a format error", body, err)
		}
	}
}

func TestLoadRejectsOtherKeys(t *testing.T) {
	if _, err := LoadPrivateKey([]byte("garbage"), nil); err == nil {
		t.Error("LoadPrivateKey(garbage) succeeded")
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := MarshalPrivateKey(p384)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPrivateKey(b, nil); err == nil || !strings.Contains(err.Error(), "P-256") {
		t.Errorf("LoadPrivateKey(P-384) = %v, want a curve error", err)
	}
	pub, err := MarshalPublicKey(p384.Public())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := LoadPublicKey(pub); err == nil {
		t.Error("LoadPublicKey(P-384) succeeded")
	}
	priv, _ := MarshalPrivateKey(newKey(t))
	if _, err := LoadPublicKey(priv); err == nil {
		t.Error("LoadPublicKey(private key PEM) succeeded")
	}
}
