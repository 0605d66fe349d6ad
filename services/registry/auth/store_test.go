package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
)

// newStore returns a Store with testParams and opts on a fresh, migrated
// PostgreSQL cluster.
func newStore(t *testing.T, opts ...Option) *Store {
	t.Helper()
	pool := testenv.RegistryDB(t)
	s, err := NewStore(pool, append([]Option{WithParams(testParams)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStoreAccounts(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)

	a, err := s.Create(ctx, "isv1", RoleISV, "s3cret")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.Name != "isv1" || a.Role != RoleISV {
		t.Fatalf("created %+v", a)
	}
	if _, err := s.Create(ctx, "isv1", RoleTenant, "x"); !errors.Is(err, ErrExists) {
		t.Fatalf("duplicate: %v", err)
	}
	for _, bad := range []struct {
		name string
		role Role
		pw   string
	}{
		{"Upper", RoleISV, "x"}, {"a..b", RoleISV, "x"}, {"", RoleISV, "x"}, {strings.Repeat("a", 65), RoleISV, "x"},
		{"ok", Role("root"), "x"}, {"ok", RoleISV, TokenPrefix + "x"}, {"ok", RoleISV, strings.Repeat("x", MaxPasswordLen+1)},
	} {
		if _, err := s.Create(ctx, bad.name, bad.role, bad.pw); !errors.Is(err, ErrInvalid) {
			t.Errorf("Create(%q, %q): %v, want ErrInvalid", bad.name, bad.role, err)
		}
	}

	got, err := s.Authenticate(ctx, "isv1", "s3cret")
	if err != nil || got.ID != a.ID || got.Role != RoleISV {
		t.Fatalf("authenticate: %+v %v", got, err)
	}
	if l, err := s.Lookup(ctx, "isv1"); err != nil || l.ID != a.ID {
		t.Fatalf("lookup: %v", err)
	}
	if _, err := s.Lookup(ctx, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("lookup unknown: %v", err)
	}

	// No enumeration: the same error value for every failure.
	if _, err := s.Create(ctx, "nopass", RoleNode, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "off", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `update accounts set disabled = true where name = 'off'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "corrupt", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `update accounts set password_hash = '$argon2id$v=19$m=4294967295,t=1,p=1$AAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAA' where name = 'corrupt'`); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]string{
		{"isv1", "wrong"}, {"nobody", "s3cret"}, {"nopass", ""}, {"nopass", "x"}, {"off", "pw"}, {"corrupt", "pw"},
		{"isv1", ""}, {"isv1", strings.Repeat("s", 5000)},
	} {
		_, err := s.Authenticate(ctx, c[0], c[1])
		if err != ErrUnauthenticated { //nolint:errorlint // the very same value is the point
			t.Errorf("Authenticate(%q): %v, want ErrUnauthenticated itself", c[0], err)
		}
	}

	if err := s.SetPassword(ctx, "isv1", "n3w"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Authenticate(ctx, "isv1", "s3cret"); err != ErrUnauthenticated { //nolint:errorlint
		t.Fatalf("old password after change: %v", err)
	}
	if _, err := s.Authenticate(ctx, "isv1", "n3w"); err != nil {
		t.Fatalf("new password: %v", err)
	}
	if err := s.SetPassword(ctx, "nobody", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("set password of unknown: %v", err)
	}
}

func TestStoreTokens(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	a, err := s.Create(ctx, "tenant1", RoleTenant, "pw")
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Create(ctx, "tenant2", RoleTenant, "pw")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := s.IssueToken(ctx, a.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, TokenPrefix) || len(secret) != tokenLen {
		t.Fatalf("secret shape %d", len(secret))
	}
	// Only the hash is stored.
	var n int
	if err := s.pool.QueryRow(ctx, `select count(*) from api_tokens where token_hash = convert_to($1, 'UTF8')`, secret).Scan(&n); err != nil || n != 0 {
		t.Fatalf("secret stored in clear: %d %v", n, err)
	}
	got, err := s.AuthenticateToken(ctx, secret)
	if err != nil || got.ID != a.ID {
		t.Fatalf("authenticate token: %+v %v", got, err)
	}
	toks, err := s.Tokens(ctx, a.ID)
	if err != nil || len(toks) != 1 || toks[0].Name != "ci" || toks[0].LastUsedAt == nil {
		t.Fatalf("tokens: %+v %v", toks, err)
	}

	for _, bad := range []string{"", "faas_", secret[:len(secret)-1], secret + "A", "xxxx_" + secret[5:],
		secret[:len(secret)-1] + "!", TokenPrefix + strings.Repeat("A", 43)} {
		if _, err := s.AuthenticateToken(ctx, bad); err != ErrUnauthenticated { //nolint:errorlint
			t.Errorf("AuthenticateToken(bad): %v", err)
		}
	}

	// Another account cannot revoke it.
	if err := s.RevokeToken(ctx, b.ID, toks[0].ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cross-account revoke: %v", err)
	}
	if _, err := s.AuthenticateToken(ctx, secret); err != nil {
		t.Fatalf("token revoked by another account: %v", err)
	}
	if err := s.RevokeToken(ctx, a.ID, toks[0].ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, a.ID, toks[0].ID); err != nil {
		t.Fatalf("second revoke: %v", err)
	}
	if _, err := s.AuthenticateToken(ctx, secret); err != ErrUnauthenticated { //nolint:errorlint
		t.Fatalf("revoked token: %v", err)
	}
	if err := s.RevokeToken(ctx, a.ID, "not-a-uuid"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoke malformed id: %v", err)
	}
	if _, err := s.IssueToken(ctx, "00000000-0000-0000-0000-000000000000", "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("token for unknown account: %v", err)
	}

	// Tokens of a disabled account stop working.
	secret2, err := s.IssueToken(ctx, b.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `update accounts set disabled = true where id = $1`, b.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateToken(ctx, secret2); err != ErrUnauthenticated { //nolint:errorlint
		t.Fatalf("token of disabled account: %v", err)
	}
}
