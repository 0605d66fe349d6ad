package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const (
	testIssuer  = "faas-registry"
	testService = "registry.test"
)

func newTestKeyring(t *testing.T) *Keyring {
	t.Helper()
	k, err := NewKeyring(testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// validClaims are claims Verify accepts at time now.
func validClaims(now time.Time) *Claims {
	return &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    testIssuer,
			Subject:   "isv1",
			Audience:  jwt.ClaimStrings{testService},
			ExpiresAt: jwt.NewNumericDate(now.Add(5 * time.Minute)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        "jti-1",
		},
		Access: []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"pull"}}},
	}
}

func sign(t *testing.T, m jwt.SigningMethod, kid string, c jwt.Claims, key any) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func currentKey(k *Keyring) *signingKey {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.current()
}

func TestIssueVerify(t *testing.T) {
	k := newTestKeyring(t)
	acc := []Access{{Type: "repository", Name: "isv1/img", Actions: []string{"pull", "push"}}}
	tok, c, err := k.Issue("isv1", testService, acc, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.ExpiresAt.Sub(c.IssuedAt.Time); got != MaxTTL {
		t.Fatalf("ttl %v not capped to %v", got, MaxTTL)
	}
	got, err := k.Verify(tok, testService)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != "isv1" || got.Issuer != testIssuer || got.ID == "" || got.NotBefore == nil ||
		!got.Allows("repository", "isv1/img", "pull", "push") || got.Allows("repository", "isv1/img", "delete") ||
		got.Allows("repository", "isv1/other", "pull") {
		t.Fatalf("claims %+v", got)
	}
	// The header names the algorithm and the kid.
	hdr, _, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(hdr)
	if !strings.Contains(string(raw), `"alg":"EdDSA"`) || !strings.Contains(string(raw), `"kid":"`+k.Current()+`"`) {
		t.Fatalf("header %s", raw)
	}
	// The access claim is the Docker shape.
	_, rest, _ := strings.Cut(tok, ".")
	payload, _, _ := strings.Cut(rest, ".")
	raw, _ = base64.RawURLEncoding.DecodeString(payload)
	if !strings.Contains(string(raw), `"access":[{"type":"repository","name":"isv1/img","actions":["pull","push"]}]`) {
		t.Fatalf("payload %s", raw)
	}
}

func TestVerifyRefuses(t *testing.T) {
	k := newTestKeyring(t)
	now := time.Now()
	cur := currentKey(k)
	good := sign(t, jwt.SigningMethodEdDSA, cur.kid, validClaims(now), cur.priv)
	if _, err := k.Verify(good, testService); err != nil {
		t.Fatalf("control token refused: %v", err)
	}

	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	pubDER, _ := x509.MarshalPKIXPublicKey(cur.pub)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	with := func(f func(c *Claims)) *Claims { c := validClaims(now); f(c); return c }

	noneTok := sign(t, jwt.SigningMethodNone, cur.kid, validClaims(now), jwt.UnsafeAllowNoneSignatureType)
	// Tampered: same header and signature, payload granting push.
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := strings.Replace(string(payload), `"actions":["pull"]`, `"actions":["pull","push"]`, 1)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
	// Tampered header: kid changed.
	badSig := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(make([]byte, 64))

	// Retired key: rotate, retire the old one.
	retired := newTestKeyring(t)
	old := currentKey(retired)
	oldTok, _, err := retired.Issue("isv1", testService, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := retired.Rotate(); err != nil {
		t.Fatal(err)
	}
	if _, err := retired.Verify(oldTok, testService); err != nil {
		t.Fatalf("old key stopped verifying before retirement: %v", err)
	}
	if err := retired.Retire(old.kid); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name string
		k    *Keyring
		tok  string
		aud  string
	}{
		{"alg none", k, noneTok, testService},
		{"alg none unsigned no kid", k, sign(t, jwt.SigningMethodNone, "", validClaims(now), jwt.UnsafeAllowNoneSignatureType), testService},
		{"unknown key and kid", k, sign(t, jwt.SigningMethodEdDSA, "deadbeef", validClaims(now), otherPriv), testService},
		{"wrong key, known kid", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, validClaims(now), otherPriv), testService},
		{"HS256 with raw public key", k, sign(t, jwt.SigningMethodHS256, cur.kid, validClaims(now), []byte(cur.pub)), testService},
		{"HS256 with PEM public key", k, sign(t, jwt.SigningMethodHS256, cur.kid, validClaims(now), pubPEM), testService},
		{"HS256 with DER public key", k, sign(t, jwt.SigningMethodHS256, cur.kid, validClaims(now), pubDER), testService},
		{"ES256", k, sign(t, jwt.SigningMethodES256, cur.kid, validClaims(now), ecKey), testService},
		{"expired", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(-10 * time.Minute))
			c.NotBefore = c.IssuedAt
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute))
		}), cur.priv), testService},
		{"not yet valid", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) {
			c.NotBefore = jwt.NewNumericDate(now.Add(2 * time.Minute))
		}), cur.priv), testService},
		{"issued in the future", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(2 * time.Minute))
		}), cur.priv), testService},
		{"no exp", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) { c.ExpiresAt = nil }), cur.priv), testService},
		{"no nbf", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) { c.NotBefore = nil }), cur.priv), testService},
		{"lifetime over 15 min", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) {
			c.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour))
		}), cur.priv), testService},
		{"wrong audience", k, good, "other.service"},
		{"no audience claim", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) { c.Audience = nil }), cur.priv), testService},
		{"wrong issuer", k, sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) { c.Issuer = "evil" }), cur.priv), testService},
		{"retired kid", retired, oldTok, testService},
		{"missing kid", k, sign(t, jwt.SigningMethodEdDSA, "", validClaims(now), cur.priv), testService},
		{"tampered payload", k, tampered, testService},
		{"bad signature", k, badSig, testService},
		{"garbage", k, "not.a.jwt", testService},
		{"empty", k, "", testService},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			claims, err := c.k.Verify(c.tok, c.aud)
			if err == nil || claims != nil {
				t.Fatalf("accepted: %+v", claims)
			}
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("error %v does not wrap ErrInvalidToken", err)
			}
		})
	}

	// Leeway: 10 s of skew is fine.
	skewed := sign(t, jwt.SigningMethodEdDSA, cur.kid, with(func(c *Claims) {
		c.NotBefore = jwt.NewNumericDate(now.Add(10 * time.Second))
		c.IssuedAt = c.NotBefore
	}), cur.priv)
	if _, err := k.Verify(skewed, testService); err != nil {
		t.Fatalf("small skew refused: %v", err)
	}
}

func TestVerifyExpiresWithClock(t *testing.T) {
	k := newTestKeyring(t)
	base := time.Now()
	k.now = func() time.Time { return base }
	tok, _, err := k.Issue("a", testService, nil, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	k.now = func() time.Time { return base.Add(time.Minute + Leeway + 2*time.Second) }
	if _, err := k.Verify(tok, testService); !errors.Is(err, ErrInvalidToken) || !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("expired token: %v", err)
	}
}

func TestRotateRetire(t *testing.T) {
	k := newTestKeyring(t)
	first := k.Current()
	if err := k.Retire(first); !errors.Is(err, ErrInvalid) {
		t.Fatalf("retiring the only key: %v", err)
	}
	second, err := k.Rotate()
	if err != nil || second == first || k.Current() != second {
		t.Fatalf("rotate: %v %s %s", err, second, k.Current())
	}
	tok, _, _ := k.Issue("a", testService, nil, 0)
	if c, err := k.Verify(tok, testService); err != nil || c.ExpiresAt.Sub(c.IssuedAt.Time) != MaxTTL {
		t.Fatalf("verify new: %v", err)
	}
	if err := k.Retire("nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("retire unknown: %v", err)
	}
	// Retiring the current key makes the previous one current again.
	if err := k.Retire(second); err != nil {
		t.Fatal(err)
	}
	if k.Current() != first {
		t.Fatalf("current %s, want %s", k.Current(), first)
	}
	if _, err := k.Verify(tok, testService); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token of retired key: %v", err)
	}
}

func TestSaveLoad(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k, err := LoadKeyring(dir, testIssuer) // creates the first key
	if err != nil {
		t.Fatal(err)
	}
	first := k.Current()
	if _, err := os.Stat(filepath.Join(dir, first+".pem")); err != nil {
		t.Fatal(err)
	}
	oldTok, _, _ := k.Issue("a", testService, nil, time.Minute)
	second, _ := k.Rotate()
	third, _ := k.Rotate()
	if err := k.Retire(second); err != nil {
		t.Fatal(err)
	}
	if err := k.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, kid := range []string{first, second, third} {
		fi, err := os.Stat(filepath.Join(dir, kid+".pem"))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("key file %s: %v %v", kid, fi.Mode(), err)
		}
	}
	fi, _ := os.Stat(dir)
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("dir mode %v", fi.Mode())
	}

	l, err := LoadKeyring(dir, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	if l.Current() != third {
		t.Fatalf("loaded current %s, want %s", l.Current(), third)
	}
	if got := l.Kids(); len(got) != 2 || got[0] != first || got[1] != third {
		t.Fatalf("loaded kids %v", got)
	}
	if _, err := l.Verify(oldTok, testService); err != nil {
		t.Fatalf("old token after load: %v", err)
	}
	newTok, _, _ := l.Issue("a", testService, nil, time.Minute)
	if _, err := k.Verify(newTok, testService); err != nil {
		t.Fatalf("loaded ring signs with another key: %v", err)
	}

	// A world-readable key file is refused.
	if err := os.Chmod(filepath.Join(dir, first+".pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(dir, testIssuer); err == nil {
		t.Fatal("loaded a 0644 key file")
	}
	os.Chmod(filepath.Join(dir, first+".pem"), 0o600)
	// A file named after another kid is refused.
	if err := os.Rename(filepath.Join(dir, first+".pem"), filepath.Join(dir, "0000.pem")); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyring(dir, testIssuer); err == nil {
		t.Fatal("loaded a misnamed key file")
	}
}
