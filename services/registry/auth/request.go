package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
)

// Why credentials were refused, for the caller; each wraps
// ErrUnauthenticated.
var (
	errMalformed   = &refusal{"malformed credentials"}
	errScheme      = &refusal{"unsupported authorization scheme: want Bearer or Basic"}
	errOtherOwner  = &refusal{"the token belongs to another account than the user name"}
	errBadPassword = &refusal{"invalid credentials"}
)

type refusal struct{ reason string }

func (e *refusal) Error() string        { return "auth: " + e.reason }
func (e *refusal) Is(target error) bool { return target == ErrUnauthenticated }

// Reason is the caller-facing reason of a refusal of credentials (an
// error of AuthenticateRequest wrapping ErrUnauthenticated): "invalid
// credentials" unless the request itself was malformed.
func Reason(err error) string {
	var r *refusal
	if errors.As(err, &r) {
		return r.reason
	}
	return errBadPassword.reason
}

// AuthenticateRequest returns the account of r's credentials, by the one
// rule of every surface of the registry (the API, key release, the token
// endpoint of /v2):
//
//	Authorization: Bearer <API token>
//	Authorization: Basic <name>:<password of name, or an API token of name>
//
// It returns nil, nil when r carries no credentials: each surface decides
// whether anonymous callers may go on. Credentials that are malformed,
// wrong, of a disabled account, or a token presented under another
// account's name wrap ErrUnauthenticated (Reason says which); password
// checks are limited as Authenticate's (ErrRateLimited, ErrBusy).
func (s *Store) AuthenticateRequest(r *http.Request) (*Account, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return nil, nil
	}
	scheme, cred, _ := strings.Cut(h, " ")
	cred = strings.TrimSpace(cred)
	ctx := r.Context()
	var a Account
	var err error
	switch strings.ToLower(scheme) {
	case "bearer":
		a, err = s.AuthenticateToken(ctx, cred)
	case "basic":
		raw, derr := base64.StdEncoding.DecodeString(cred)
		user, pass, ok := strings.Cut(string(raw), ":")
		if derr != nil || !ok || user == "" || pass == "" {
			return nil, errMalformed
		}
		if strings.HasPrefix(pass, TokenPrefix) {
			a, err = s.AuthenticateToken(ctx, pass)
			if err == nil && a.Name != user {
				return nil, errOtherOwner
			}
		} else {
			a, err = s.Authenticate(ctx, user, pass)
		}
	default:
		return nil, errScheme
	}
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return nil, errBadPassword
	case err != nil:
		return nil, err
	case a.Disabled:
		return nil, errBadPassword
	}
	return &a, nil
}
