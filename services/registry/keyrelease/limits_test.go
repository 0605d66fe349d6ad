package keyrelease_test

import (
	"crypto/ecdh"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/jackc/pgx/v5/pgxpool"
)

// TestPasswordLockout: the key release checks passwords under the same
// limits as every other endpoint (it used to escape the login limit): 429
// with Retry-After once a node account failed too often, to the right
// password too, until the lockout has passed.
func TestPasswordLockout(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	srv, accounts := startHandler(t, auth.WithLimits(auth.Limits{Now: clock}))
	if _, err := accounts.Create(t.Context(), "node1", auth.RoleNode, "right"); err != nil {
		t.Fatal(err)
	}
	post := func(pass string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL+releasePath, strings.NewReader(`{}`))
		req.SetBasicAuth("node1", pass)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	free := auth.DefaultAccountBackoff.Free
	for i := 1; i <= 30; i++ {
		code, retry := post(fmt.Sprintf("guess-%d", i))
		switch {
		case i <= free+1 && code != http.StatusUnauthorized:
			t.Fatalf("guess %d: %d, want 401", i, code)
		case i > free+1 && (code != http.StatusTooManyRequests || retry != "1"):
			t.Fatalf("guess %d: %d Retry-After %q, want 429 Retry-After 1", i, code, retry)
		}
	}
	if code, _ := post("right"); code != http.StatusTooManyRequests {
		t.Fatalf("right password while locked: %d", code)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	// Authenticated: the empty request is refused for what it is.
	if code, _ := post("right"); code != http.StatusBadRequest {
		t.Fatalf("right password after the lockout: %d, want 400 (authenticated, empty request)", code)
	}
}

// startHandler serves a key release on a fresh database, with a directory
// blob store and new platform keys, and returns it with its account store.
func startHandler(t testing.TB, opts ...auth.Option) (*httptest.Server, *auth.Store) {
	t.Helper()
	pool := testenv.RegistryDB(t)
	st, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts = append([]auth.Option{auth.WithParams(auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32})}, opts...)
	accounts, err := auth.NewStore(pool, opts...)
	if err != nil {
		t.Fatal(err)
	}
	platform, err := validation.LoadPlatformKeys(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return serve(t, pool, accounts, meta.New(pool), st, platform.Recipient), accounts
}

// releasePath is where the API serves the key release.
const releasePath = registryapi.Prefix + registryapi.KeyReleasePath

// serve serves the API with a key release over pool, as the registry
// does, and returns it.
func serve(t testing.TB, pool *pgxpool.Pool, accounts *auth.Store, ms *meta.Store, blobs blob.Store, recipient *ecdh.PrivateKey) *httptest.Server {
	t.Helper()
	rel, err := keyrelease.New(keyrelease.Config{Pool: pool, Meta: ms, Blobs: blobs, Recipient: recipient})
	if err != nil {
		t.Fatal(err)
	}
	h, err := api.New(api.Config{DB: pool, Accounts: accounts, Meta: ms, KeyRelease: rel})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}
