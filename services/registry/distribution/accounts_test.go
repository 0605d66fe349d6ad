package distribution_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// grants is a distribution.AccountAuthorizer for tests: a request names its
// account in X-Test-Account and what it may do, on every repository, in
// X-Test-Grants ("pull,push"); without X-Test-Grants it may do anything.
type grants struct{}

func (grants) Authorize(r *http.Request, repo string, actions ...string) error {
	_, err := grants{}.AuthorizeAccount(r, repo, actions...)
	return err
}

func (grants) AuthorizeAccount(r *http.Request, repo string, actions ...string) (string, error) {
	account := r.Header.Get("X-Test-Account")
	g, ok := r.Header["X-Test-Grants"]
	if !ok {
		return account, nil
	}
	have := strings.Split(strings.Join(g, ","), ",")
	for _, a := range actions {
		if !slices.Contains(have, a) {
			return account, fmt.Errorf("%w: no %s", distribution.ErrDenied, a)
		}
	}
	return account, nil
}

// accountsDB starts PostgreSQL with the registry's schema and accounts of
// the given names (role isv).
func accountsDB(t *testing.T, names ...string) *pgxpool.Pool {
	t.Helper()
	pool := testenv.RegistryDB(t)
	for _, n := range names {
		if _, err := pool.Exec(context.Background(), `insert into accounts (name, role) values ($1, 'isv')`, n); err != nil {
			t.Fatal(err)
		}
	}
	return pool
}

// newMetaWithAccounts returns the metadata store on an accountsDB.
func newMetaWithAccounts(t *testing.T, names ...string) *meta.Store {
	return meta.New(accountsDB(t, names...))
}

// as returns the headers of a request by account with grants.
func as(account, grants string) []string {
	return []string{"X-Test-Account", account, "X-Test-Grants", grants}
}

// TestUploadStatusScopes: the status of an upload answers to the upload's
// own grant (push) and, for the account that started it, to a pull grant,
// as clients that pick tokens by method send; to nobody else. Cancelling
// answers to push or delete.
func TestUploadStatusScopes(t *testing.T) {
	c := client{t, serve(t, distribution.Config{Meta: newMetaWithAccounts(t, "isv", "tenant"), Blobs: newDirStore(t), Authorizer: grants{}})}
	loc := c.do("POST", "/v2/isv/img/blobs/uploads/", nil, as("isv", "push")...).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", loc, []byte("abc"), append(as("isv", "push"), "Content-Range", "0-2")...).want(t, 202, "")
	for _, g := range []string{"push", "pull,push", "pull"} {
		c.do("GET", loc, nil, as("isv", g)...).want(t, 204, "").header(t, "Range", "0-2")
	}
	// Another account that may pull learns nothing, not even whether the upload exists.
	c.do("GET", loc, nil, as("tenant", "pull")...).want(t, 403, "DENIED")
	c.do("GET", "/v2/isv/img/blobs/uploads/0123456789abcdef0123456789abcdef", nil, as("tenant", "pull")...).want(t, 403, "DENIED")
	c.do("GET", "/v2/isv/img/blobs/uploads/0123456789abcdef0123456789abcdef", nil, as("isv", "pull")...).want(t, 403, "DENIED")
	c.do("GET", "/v2/isv/img/blobs/uploads/0123456789abcdef0123456789abcdef", nil, as("isv", "push")...).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
	// Without any grant, or anonymously with pull: denied.
	c.do("GET", loc, nil, as("isv", "delete")...).want(t, 403, "DENIED")
	c.do("GET", loc, nil, as("", "pull")...).want(t, 403, "DENIED")
	// Pull is for the status only.
	c.do("PATCH", loc, []byte("d"), append(as("isv", "pull"), "Content-Range", "3-3")...).want(t, 403, "DENIED")
	c.do("DELETE", loc, nil, as("isv", "pull")...).want(t, 403, "DENIED")
	// Cancelling takes push, or delete (as the reference registry asks).
	c.do("DELETE", loc, nil, as("isv", "delete")...).want(t, 204, "")
	loc = c.do("POST", "/v2/isv/img/blobs/uploads/", nil, as("isv", "push")...).want(t, 202, "").Header.Get("Location")
	c.do("DELETE", loc, nil, as("isv", "push")...).want(t, 204, "")
}
