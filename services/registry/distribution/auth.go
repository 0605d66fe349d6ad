package distribution

import (
	"errors"
	"net/http"
)

// Actions an Authorizer is asked for.
const (
	ActionPull    = "pull"
	ActionPush    = "push"
	ActionDelete  = "delete"
	ActionCatalog = "catalog" // with repository "": list all repositories
)

var (
	// ErrUnauthorized: the caller is not (or not validly) authenticated; 401.
	ErrUnauthorized = errors.New("distribution: unauthorized")
	// ErrDenied: the caller is authenticated but may not do this; 403.
	ErrDenied = errors.New("distribution: denied")
)

// Authorizer decides whether request r may perform actions on repository
// repo; see the package doc. It returns nil, or an error wrapping
// ErrUnauthorized or ErrDenied; any other error answers 500.
type Authorizer interface {
	Authorize(r *http.Request, repo string, actions ...string) error
}

// AccountAuthorizer is an Authorizer that also names the account a request
// is authorized as. The registry counts uploads per account (see the package
// doc) and lets the account that started an upload read its status with a
// pull grant. Authorizers without it leave every request anonymous ("").
type AccountAuthorizer interface {
	Authorizer
	// AuthorizeAccount decides like Authorize and returns the name of the
	// authenticated account ("" for none), also along with ErrDenied.
	AuthorizeAccount(r *http.Request, repo string, actions ...string) (account string, err error)
}

// Challenger is implemented by Authorizers that tell clients how to
// authenticate: Challenge returns the WWW-Authenticate header value for a
// 401 answer to r (for the token flow, `Bearer realm="…",service="…",scope="…"`).
type Challenger interface {
	Challenge(r *http.Request, repo string, actions ...string) string
}

// AllowAll is an Authorizer that admits every request. For tests.
type AllowAll struct{}

// Authorize implements Authorizer.
func (AllowAll) Authorize(*http.Request, string, ...string) error { return nil }
