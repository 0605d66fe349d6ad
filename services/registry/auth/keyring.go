package auth

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/golang-jwt/jwt/v5"
)

// Algorithm is the only JWT algorithm the keyring signs with and accepts.
// Ed25519 was chosen over ES256: deterministic signatures (no per-signature
// nonce to get wrong), 32-byte keys, fast verification, and no curve-point
// validation pitfalls. Docker clients treat the token as opaque, so they do
// not care.
const Algorithm = "EdDSA"

// MaxTTL caps the lifetime of an access token: a leaked token is good for
// at most 15 minutes (SECURITY.md, "Limits").
const MaxTTL = 15 * time.Minute

// Leeway is the clock skew tolerated on exp, nbf and iat.
const Leeway = 30 * time.Second

// Access is one entry of the Docker token "access" claim.
type Access struct {
	Type    string   `json:"type"`    // "repository"
	Name    string   `json:"name"`    // "isv1/img"
	Actions []string `json:"actions"` // "pull", "push", "delete", "*"
}

// Claims are an access token's claims.
type Claims struct {
	jwt.RegisteredClaims
	Access []Access `json:"access"`
}

// Allows reports whether the claims grant every one of actions on the
// resource typ/name; "*" grants every action.
func (c *Claims) Allows(typ, name string, actions ...string) bool {
	granted := map[string]bool{}
	for _, a := range c.Access {
		if a.Type == typ && a.Name == name {
			for _, act := range a.Actions {
				granted[act] = true
			}
		}
	}
	for _, want := range actions {
		if !granted[want] && !granted["*"] {
			return false
		}
	}
	return true
}

type signingKey struct {
	kid     string
	priv    ed25519.PrivateKey
	pub     ed25519.PublicKey
	created time.Time
	retired bool
}

// Keyring holds the JWT signing keys of one issuer. Every unretired key
// verifies; the current (signing) key is the newest unretired key that is
// published, that is older than the publish delay (see WithPublishDelay),
// or when none is, the oldest unretired key. It is safe for concurrent use.
type Keyring struct {
	issuer       string
	publishDelay time.Duration
	now          func() time.Time // for tests

	mu   sync.RWMutex
	keys []*signingKey // in order of creation
}

// KeyringOption configures a Keyring.
type KeyringOption func(*Keyring)

// WithPublishDelay makes a key sign only once it is older than d (by its
// creation time), and verify from the start. Replicas that share a key
// directory each reload it now and then (Reload): a new key must be known
// to all of them before any signs with it, else a token it signed is
// refused by a replica that has not seen it yet. So d must exceed the
// reload interval plus the time the directory takes to reach every replica
// (a Kubernetes Secret's propagation, say). Zero, the default, signs with
// a new key at once, which is right for a single process.
func WithPublishDelay(d time.Duration) KeyringOption {
	return func(k *Keyring) { k.publishDelay = max(d, 0) }
}

// withClock sets the keyring's clock (tests).
func withClock(now func() time.Time) KeyringOption {
	return func(k *Keyring) { k.now = now }
}

func newEmptyKeyring(issuer string, opts []KeyringOption) (*Keyring, error) {
	if issuer == "" {
		return nil, fmt.Errorf("%w: empty issuer", ErrInvalid)
	}
	k := &Keyring{issuer: issuer, now: time.Now}
	for _, o := range opts {
		o(k)
	}
	return k, nil
}

// NewKeyring returns a keyring for issuer with one fresh key.
func NewKeyring(issuer string, opts ...KeyringOption) (*Keyring, error) {
	k, err := newEmptyKeyring(issuer, opts)
	if err != nil {
		return nil, err
	}
	if _, err := k.Rotate(); err != nil {
		return nil, err
	}
	return k, nil
}

// Issuer returns the iss of the tokens the keyring issues and accepts.
func (k *Keyring) Issuer() string { return k.issuer }

func newKey(now time.Time) (*signingKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate key: %w", err)
	}
	return &signingKey{kid: kidOf(pub), priv: priv, pub: pub, created: now.UTC()}, nil
}

// kidOf names a key by the first 16 bytes of the SHA-256 of its public key.
func kidOf(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:16])
}

// Rotate adds a new key and returns its kid. It verifies at once and
// becomes the current signing key once the publish delay has passed. Older
// keys still verify until retired.
func (k *Keyring) Rotate() (string, error) {
	key, err := newKey(k.now())
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	// Keep creation times strictly increasing: they order the keys on load.
	if n := len(k.keys); n > 0 && !key.created.After(k.keys[n-1].created) {
		key.created = k.keys[n-1].created.Add(time.Nanosecond)
	}
	k.keys = append(k.keys, key)
	return key.kid, nil
}

// Retire stops kid from verifying (and signing). The last unretired key
// cannot be retired: Rotate first.
func (k *Keyring) Retire(kid string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var found *signingKey
	live := 0
	for _, key := range k.keys {
		if !key.retired {
			live++
		}
		if key.kid == kid {
			found = key
		}
	}
	switch {
	case found == nil:
		return fmt.Errorf("%w: key %q", ErrNotFound, kid)
	case found.retired:
		return nil
	case live == 1:
		return fmt.Errorf("%w: cannot retire the last key; rotate first", ErrInvalid)
	}
	found.retired = true
	return nil
}

// Current returns the kid of the signing key.
func (k *Keyring) Current() string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if c := k.current(); c != nil {
		return c.kid
	}
	return ""
}

func (k *Keyring) current() *signingKey {
	now := k.now()
	var oldest *signingKey
	for i := len(k.keys) - 1; i >= 0; i-- {
		key := k.keys[i]
		if key.retired {
			continue
		}
		if k.published(key, now) {
			return key
		}
		oldest = key
	}
	// No key is published yet: the first key of a new ring, or every
	// published one was retired (a compromised key, say). The oldest is
	// the one the others have known longest.
	return oldest
}

func (k *Keyring) published(key *signingKey, now time.Time) bool {
	return !key.created.Add(k.publishDelay).After(now)
}

// KeyInfo describes one key of a Keyring.
type KeyInfo struct {
	Kid     string    `json:"kid"`
	Created time.Time `json:"created"`
	// SignsFrom is when the key became or becomes eligible to sign:
	// Created plus the publish delay.
	SignsFrom time.Time `json:"signs_from"`
	Retired   bool      `json:"retired"`
	// Current: the key signs the tokens issued now.
	Current bool `json:"current"`
}

// Keys describes every key of the ring, retired ones included, oldest
// first.
func (k *Keyring) Keys() []KeyInfo {
	k.mu.RLock()
	defer k.mu.RUnlock()
	cur := k.current()
	out := make([]KeyInfo, 0, len(k.keys))
	for _, key := range k.keys {
		out = append(out, KeyInfo{Kid: key.kid, Created: key.created, SignsFrom: key.created.Add(k.publishDelay),
			Retired: key.retired, Current: key == cur})
	}
	return out
}

// Kids returns the kids of the keys that verify, oldest first.
func (k *Keyring) Kids() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	var out []string
	for _, key := range k.keys {
		if !key.retired {
			out = append(out, key.kid)
		}
	}
	return out
}

// Issue signs an access token for subject (the account name, "" when
// anonymous) and audience (the service) granting access, valid for ttl,
// capped at MaxTTL. It returns the compact token and its claims.
func (k *Keyring) Issue(subject, audience string, access []Access, ttl time.Duration) (string, *Claims, error) {
	if audience == "" {
		return "", nil, fmt.Errorf("%w: empty audience", ErrInvalid)
	}
	if ttl <= 0 || ttl > MaxTTL {
		ttl = MaxTTL
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", nil, fmt.Errorf("auth: jti: %w", err)
	}
	now := k.now().Truncate(time.Second)
	if access == nil {
		access = []Access{}
	}
	c := &Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    k.issuer,
			Subject:   subject,
			Audience:  jwt.ClaimStrings{audience},
			ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
			NotBefore: jwt.NewNumericDate(now),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        hex.EncodeToString(jti),
		},
		Access: access,
	}
	k.mu.RLock()
	key := k.current()
	k.mu.RUnlock()
	if key == nil {
		return "", nil, fmt.Errorf("%w: keyring has no key", ErrInvalid)
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = key.kid
	s, err := t.SignedString(key.priv)
	if err != nil {
		return "", nil, fmt.Errorf("auth: sign token: %w", err)
	}
	return s, c, nil
}

// Verify checks token and returns its claims. It accepts only Algorithm,
// requires a kid naming an unretired key of the ring, the keyring's issuer,
// audience among aud, and exp, nbf and iat present and valid within Leeway.
// Every refusal wraps ErrInvalidToken.
func (k *Keyring) Verify(token, audience string) (*Claims, error) {
	if audience == "" {
		return nil, fmt.Errorf("%w: empty audience", ErrInvalidToken)
	}
	if len(token) > 8192 {
		return nil, fmt.Errorf("%w: token too long", ErrInvalidToken)
	}
	p := jwt.NewParser(
		jwt.WithValidMethods([]string{Algorithm}),
		jwt.WithIssuer(k.issuer),
		jwt.WithAudience(audience),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(Leeway),
		jwt.WithTimeFunc(k.now),
		jwt.WithStrictDecoding(),
	)
	c := &Claims{}
	_, err := p.ParseWithClaims(token, c, k.keyFor)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if c.NotBefore == nil || c.IssuedAt == nil {
		return nil, fmt.Errorf("%w: nbf and iat are required", ErrInvalidToken)
	}
	if c.ExpiresAt.Sub(c.IssuedAt.Time) > MaxTTL {
		return nil, fmt.Errorf("%w: lifetime over %v", ErrInvalidToken, MaxTTL)
	}
	return c, nil
}

func (k *Keyring) keyFor(t *jwt.Token) (any, error) {
	if _, ok := t.Method.(*jwt.SigningMethodEd25519); !ok {
		return nil, errors.New("unexpected signing method")
	}
	kid, ok := t.Header["kid"].(string)
	if !ok || kid == "" {
		return nil, errors.New("missing kid")
	}
	k.mu.RLock()
	defer k.mu.RUnlock()
	for _, key := range k.keys {
		if key.kid == kid {
			if key.retired {
				return nil, errors.New("kid is retired")
			}
			return key.pub, nil
		}
	}
	return nil, errors.New("unknown kid")
}

// PEM headers of a key file.
const (
	pemType       = "PRIVATE KEY"
	headerCreated = "Created"
	headerRetired = "Retired"
	keyFileSuffix = ".pem"
)

// Save writes every key of the ring to dir as <kid>.pem: a PKCS#8 PEM block
// with headers Created (RFC 3339) and, for retired keys, Retired: yes. Files
// are written 0600 through a temporary file and rename; dir is created 0700.
// Files of keys not in the ring are left alone.
func (k *Keyring) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("auth: key directory: %w", err)
	}
	k.mu.RLock()
	keys := slices.Clone(k.keys)
	retired := make([]bool, len(keys))
	for i, key := range keys {
		retired[i] = key.retired
	}
	k.mu.RUnlock()
	for i, key := range keys {
		der, err := x509.MarshalPKCS8PrivateKey(key.priv)
		if err != nil {
			return fmt.Errorf("auth: marshal key %s: %w", key.kid, err)
		}
		h := map[string]string{headerCreated: key.created.Format(time.RFC3339Nano)}
		if retired[i] {
			h[headerRetired] = "yes"
		}
		data := pem.EncodeToMemory(&pem.Block{Type: pemType, Headers: h, Bytes: der})
		if err := writeFile(filepath.Join(dir, key.kid+keyFileSuffix), data); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, data []byte) error {
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("auth: save key: %w", err)
	}
	return nil
}

// LoadKeyring reads the *.pem keys of dir into a keyring for issuer. When
// dir is missing or holds no unretired key, a first key is generated and
// saved. Key files readable by group or others are refused, as are files
// whose name is not the kid of their key.
func LoadKeyring(dir, issuer string, opts ...KeyringOption) (*Keyring, error) {
	k, err := newEmptyKeyring(issuer, opts)
	if err != nil {
		return nil, err
	}
	if k.keys, err = readKeyDir(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	if k.current() == nil {
		if _, err := k.Rotate(); err != nil {
			return nil, err
		}
		if err := k.Save(dir); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// ReadKeyring is LoadKeyring without the first key: a dir that is missing
// or holds no unretired key is an error wrapping ErrNotFound.
func ReadKeyring(dir, issuer string, opts ...KeyringOption) (*Keyring, error) {
	k, err := newEmptyKeyring(issuer, opts)
	if err != nil {
		return nil, err
	}
	if err := k.Reload(dir); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload replaces the keys of the ring with those of dir, the key
// directory replicas share: keys added there start verifying (and signing
// once published), keys marked retired or removed stop verifying. A dir
// that cannot be read, holds a bad key file or no unretired key leaves the
// ring as it was and returns the error (wrapping ErrNotFound for no key):
// a half-updated directory must not lock everybody out. Keys added by
// Rotate and not saved to dir are dropped.
func (k *Keyring) Reload(dir string) error {
	keys, err := readKeyDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w: key directory %s: %w", ErrNotFound, dir, err)
	}
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(keys, func(key *signingKey) bool { return !key.retired }) {
		return fmt.Errorf("%w: no unretired key in %s", ErrNotFound, dir)
	}
	k.mu.Lock()
	k.keys = keys
	k.mu.Unlock()
	return nil
}

// readKeyDir reads the keys of dir, ordered by creation. A missing dir
// wraps os.ErrNotExist.
func readKeyDir(dir string) ([]*signingKey, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("auth: key directory: %w", err)
	}
	var keys []*signingKey
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, keyFileSuffix) || strings.HasPrefix(name, ".") {
			continue
		}
		key, err := loadKey(filepath.Join(dir, name))
		if errors.Is(err, os.ErrNotExist) {
			continue // removed since ReadDir: retired by an operator
		}
		if err != nil {
			return nil, err
		}
		if key.kid+keyFileSuffix != name {
			return nil, fmt.Errorf("auth: key file %s holds key %s", name, key.kid)
		}
		keys = append(keys, key)
	}
	slices.SortStableFunc(keys, func(a, b *signingKey) int {
		if c := a.created.Compare(b.created); c != 0 {
			return c
		}
		return strings.Compare(a.kid, b.kid)
	})
	return keys, nil
}

func loadKey(path string) (*signingKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("auth: key file: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("auth: key file %s: mode %v, want 0600", path, fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: key file: %w", err)
	}
	b, rest := pem.Decode(data)
	if b == nil || b.Type != pemType || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, fmt.Errorf("auth: key file %s: want one %q PEM block", path, pemType)
	}
	parsed, err := x509.ParsePKCS8PrivateKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("auth: key file %s: %w", path, err)
	}
	priv, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("auth: key file %s: not an Ed25519 key", path)
	}
	created, err := time.Parse(time.RFC3339Nano, b.Headers[headerCreated])
	if err != nil {
		return nil, fmt.Errorf("auth: key file %s: Created header: %w", path, err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	return &signingKey{kid: kidOf(pub), priv: priv, pub: pub, created: created,
		retired: b.Headers[headerRetired] == "yes"}, nil
}
