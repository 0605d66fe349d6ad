package api

import (
	"context"
	"net/http"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// asKey carries the account ServeAs runs a request as.
type asKey struct{}

// ServeAs serves r as acct, whose credentials the caller has already
// checked (the portal's session sign-in): the route's role rules, audit and
// validation apply exactly as to a request carrying acct's credentials, and
// any Authorization header of r is ignored. A nil acct serves r as an
// anonymous caller. Only code in the same process can call it, so it adds no
// way in from the network.
func (a *API) ServeAs(w http.ResponseWriter, r *http.Request, acct *auth.Account) {
	r = r.Clone(context.WithValue(r.Context(), asKey{}, asValue{acct}))
	r.Header.Del("Authorization")
	a.e.ServeHTTP(w, r)
}

type asValue struct{ acct *auth.Account }

// serveAsAccount returns the account of a ServeAs request, and whether r
// is one.
func serveAsAccount(ctx context.Context) (*auth.Account, bool) {
	v, ok := ctx.Value(asKey{}).(asValue)
	return v.acct, ok
}
