package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/distribution"
)

// CatalogScope is the scope challenged for the catalog.
const CatalogScope = "registry:catalog:*"

// accountLookup finds accounts by name; *auth.Store is one.
type accountLookup interface {
	Lookup(ctx context.Context, name string) (auth.Account, error)
}

// authorizer adapts auth.BearerAuthorizer to distribution.Authorizer and
// distribution.Challenger.
type authorizer struct {
	bearer   auth.BearerAuthorizer
	accounts accountLookup
}

var (
	_ distribution.AccountAuthorizer = (*authorizer)(nil)
	_ distribution.Challenger        = (*authorizer)(nil)
)

// Authorize implements distribution.Authorizer.
func (a *authorizer) Authorize(r *http.Request, repo string, actions ...string) error {
	_, err := a.AuthorizeAccount(r, repo, actions...)
	return err
}

// AuthorizeAccount implements distribution.AccountAuthorizer: the account
// is the token's subject.
func (a *authorizer) AuthorizeAccount(r *http.Request, repo string, actions ...string) (string, error) {
	catalog := repo == "" && slices.Contains(actions, distribution.ActionCatalog)
	if repo == "" {
		actions = nil
	}
	claims, err := a.bearer.Authorize(r, repo, actions...)
	subject := ""
	if claims != nil {
		subject = claims.Subject
	}
	if err != nil {
		return subject, mapAuthErr(err)
	}
	if !catalog {
		return subject, nil
	}
	return subject, a.authorizeCatalog(r, claims)
}

// authorizeCatalog checks that the token's subject may list the catalog.
func (a *authorizer) authorizeCatalog(r *http.Request, claims *auth.Claims) error {
	// auth.TokenHandler grants no registry:catalog scope; the catalog is
	// for admins, checked against the account (it may have been disabled
	// or demoted since the token was issued).
	if claims.Subject == "" {
		return fmt.Errorf("%w: catalog requires an admin account", distribution.ErrDenied)
	}
	acct, err := a.accounts.Lookup(r.Context(), claims.Subject)
	if errors.Is(err, auth.ErrNotFound) {
		return fmt.Errorf("%w: catalog requires an admin account", distribution.ErrDenied)
	}
	if err != nil {
		return fmt.Errorf("server: catalog authorization: %w", err)
	}
	if acct.Disabled || acct.Role != auth.RoleAdmin {
		return fmt.Errorf("%w: catalog requires an admin account", distribution.ErrDenied)
	}
	return nil
}

func mapAuthErr(err error) error {
	switch {
	case errors.Is(err, auth.ErrUnauthorized):
		return fmt.Errorf("%w: %w", distribution.ErrUnauthorized, err)
	case errors.Is(err, auth.ErrDenied):
		return fmt.Errorf("%w: %w", distribution.ErrDenied, err)
	}
	return err
}

// Challenge implements distribution.Challenger.
func (a *authorizer) Challenge(r *http.Request, repo string, actions ...string) string {
	if repo == "" && slices.Contains(actions, distribution.ActionCatalog) {
		realm := a.bearer.Realm
		if realm == "" {
			u := url.URL{Scheme: "http", Host: r.Host, Path: "/auth/token"}
			if r.TLS != nil {
				u.Scheme = "https"
			}
			realm = u.String()
		}
		return auth.Challenge(realm, a.bearer.Audience, CatalogScope)
	}
	if repo == "" {
		actions = nil
	}
	return a.bearer.Challenge(r, repo, actions)
}

// Policy is the registry's auth.Policy; see the package doc for its rules.
type Policy struct {
	pool *pgxpool.Pool
}

// NewPolicy returns the policy over the database of pool (migrated).
func NewPolicy(pool *pgxpool.Pool) *Policy { return &Policy{pool: pool} }

var _ auth.Policy = (*Policy)(nil)

// ownerActions are what a namespace owner (and an admin) may do.
var ownerActions = []string{distribution.ActionPull, distribution.ActionPush, distribution.ActionDelete, "*"}

// Allowed implements auth.Policy.
func (p *Policy) Allowed(ctx context.Context, acct *auth.Account, repo string, actions []string) ([]string, error) {
	if acct == nil || acct.Disabled || repo == "" {
		return nil, nil
	}
	if acct.Role == auth.RoleAdmin || (acct.Role == auth.RoleISV && Owner(repo) == acct.Name) {
		return filter(actions, ownerActions), nil
	}
	if !slices.Contains(actions, distribution.ActionPull) {
		return nil, nil
	}
	if acct.Role == auth.RoleNode {
		// A node pulls as itself only what the pool assigned it: an image
		// of a live attachment on one of its nodes. (Loads a tenant asks
		// for directly pull with the tenant's token.)
		ok, err := p.assigned(ctx, acct.ID, repo)
		if err != nil || !ok {
			return nil, err
		}
		return []string{distribution.ActionPull}, nil
	}
	ok, err := p.Entitled(ctx, acct.ID, repo)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, nil
	}
	return []string{distribution.ActionPull}, nil
}

// Owner returns the account name owning repository repo: its first path
// component, or "" when repo has a single component (no namespace).
func Owner(repo string) string {
	ns, _, ok := strings.Cut(repo, "/")
	if !ok {
		return ""
	}
	return ns
}

func filter(want, allowed []string) []string {
	var out []string
	for _, a := range want {
		if slices.Contains(allowed, a) && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Entitled reports whether the account with id accountID may pull repository
// repo as a customer: the repository belongs to a published public listing,
// or the account holds an active entitlement to its listing.
func (p *Policy) Entitled(ctx context.Context, accountID, repo string) (bool, error) {
	const q = `
select exists (
    select 1
    from listings l join repositories r on r.id = l.repository_id
    where r.name = $1 and (
        (l.published and l.visibility = 'public')
        or exists (
            select 1 from entitlements e
            where e.listing_id = l.id and e.account_id = $2::uuid
              and e.revoked_at is null
              and (e.expires_at is null or e.expires_at > now()))))`
	var ok bool
	if err := p.pool.QueryRow(ctx, q, repo, accountID).Scan(&ok); err != nil {
		return false, fmt.Errorf("server: entitlement check: %w", err)
	}
	return ok, nil
}

// assigned reports whether node account accountID has a node holding a
// live attachment of repository repo.
func (p *Policy) assigned(ctx context.Context, accountID, repo string) (bool, error) {
	var ok bool
	err := p.pool.QueryRow(ctx, `select exists (select 1 from attachments a join nodes n on n.id = a.node_id
		where n.account_id = $1::uuid and n.revoked_at is null and a.repository = $2
		and a.state in ('pending', 'loading', 'ready'))`, accountID, repo).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("server: attachment check: %w", err)
	}
	return ok, nil
}
