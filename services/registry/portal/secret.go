package portal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"time"
)

// A new API token's secret is shown on the page the creating form
// redirects to (POST-redirect-GET: a reload must not create another), so
// it crosses the redirect in a cookie: never in the URL, where history,
// logs and Referer keep it. The cookie is sealed (AES-GCM) under a key
// derived from the session's own cookie, so only the browser that created
// the token can open it, lives a minute, and is cleared as it is read.

// secretCookie is the cookie's name; it is sent to /tokens only.
const secretCookie = "faas_new_token"

// secretTTL bounds the redirect's round trip.
const secretTTL = time.Minute

// newSecret is what the cookie holds.
type newSecret struct {
	Name    string    `json:"n"`
	Secret  string    `json:"s"`
	Expires time.Time `json:"e"`
}

// secretAEAD is the cipher keyed by the session's cookie value.
func secretAEAD(sessionID string) (cipher.AEAD, error) {
	key, err := hkdf.Key(sha256.New, []byte(sessionID), nil, "faas portal: new token secret", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// sessionID is the value of r's session cookie.
func (p *Portal) sessionID(r *http.Request) string {
	if c, err := r.Cookie(p.cookieName()); err == nil {
		return c.Value
	}
	return ""
}

// setSecret seals name and secret into the cookie for r's session.
func (p *Portal) setSecret(w http.ResponseWriter, r *http.Request, name, secret string) error {
	aead, err := secretAEAD(p.sessionID(r))
	if err != nil {
		return err
	}
	plain, err := json.Marshal(newSecret{Name: name, Secret: secret, Expires: time.Now().Add(secretTTL)})
	if err != nil {
		return err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return err
	}
	sealed := aead.Seal(nonce, nonce, plain, []byte(secretCookie))
	http.SetCookie(w, &http.Cookie{Name: secretCookie, Value: base64.RawURLEncoding.EncodeToString(sealed), Path: "/tokens",
		MaxAge: int(secretTTL / time.Second), HttpOnly: true, Secure: p.cfg.Secure, SameSite: http.SameSiteStrictMode})
	return nil
}

// takeSecret returns the secret the cookie holds, if it opens under r's
// session and has not expired, and clears the cookie either way.
func (p *Portal) takeSecret(w http.ResponseWriter, r *http.Request) (newSecret, bool) {
	c, err := r.Cookie(secretCookie)
	if err != nil {
		return newSecret{}, false
	}
	http.SetCookie(w, &http.Cookie{Name: secretCookie, Path: "/tokens", MaxAge: -1, HttpOnly: true,
		Secure: p.cfg.Secure, SameSite: http.SameSiteStrictMode})
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	aead, aerr := secretAEAD(p.sessionID(r))
	if err != nil || aerr != nil || len(sealed) < aead.NonceSize() {
		return newSecret{}, false
	}
	n := aead.NonceSize()
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], []byte(secretCookie))
	var s newSecret
	if err != nil || json.Unmarshal(plain, &s) != nil || time.Now().After(s.Expires) {
		return newSecret{}, false
	}
	return s, true
}
