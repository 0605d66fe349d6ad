package server

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// principal is an authenticated caller.
type principal struct {
	operator bool
	tenant   string
	tenantID string
	token    string // registry API token, when the caller sent one
	grant    *grantEntry
}

func (p *principal) owns(r slots.Record) bool {
	return p.operator || (p.tenant != "" && r.Tenant == p.tenant)
}

type handler func(http.ResponseWriter, *http.Request, *principal)

func (s *Server) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			writeErrorFor(w, err, agentapi.CodeUnauthenticated, "")
			return
		}
		h(w, r, p)
	}
}

func (s *Server) authenticate(r *http.Request) (*principal, error) {
	pr, _ := r.Context().Value(peerKey).(peer)
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "+GrantPrefix); ok {
		g, err := s.cfg.Grants.lookup(tok)
		if err != nil {
			return nil, err
		}
		return &principal{grant: g}, nil
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		acct, err := s.checkToken(r.Context(), tok)
		if err != nil {
			return nil, err
		}
		// A token names who acts, whatever the uid: an operator's process
		// sending a tenant's token acts as that tenant (least privilege),
		// and has the operator's rights by calling without one.
		return &principal{tenant: acct.Name, tenantID: acct.ID, token: tok}, nil
	}
	if !pr.unix {
		return nil, errors.New("send a tenant token: Authorization: Bearer faas_…")
	}
	if s.ops[pr.uid] {
		return &principal{operator: true}, nil
	}
	if t, ok := s.cfg.Tenants[pr.uid]; ok {
		return &principal{tenant: t}, nil
	}
	return nil, fmt.Errorf("uid %d is not a tenant of this node; run `faas login` or ask the operator to map it", pr.uid)
}

func (s *Server) checkToken(ctx context.Context, tok string) (registryapi.Account, error) {
	key := sha256.Sum256([]byte(tok))
	now := time.Now()
	s.tokMu.Lock()
	e, ok := s.tokens[key]
	s.tokMu.Unlock()
	if ok && now.Before(e.expires) {
		return e.acct, nil
	}
	acct, err := s.cfg.Registry.Tenant(ctx, tok)
	switch {
	case errors.Is(err, registryclient.ErrUnauthenticated):
		return acct, agentErr(agentapi.CodeUnauthenticated, "the registry does not accept your token", "run `faas login` again")
	case err != nil:
		return acct, agentErr(agentapi.CodeUnavailable, "checking your token with the registry: "+err.Error(), "retry when the registry is reachable")
	case acct.Role != "tenant" && acct.Role != "admin":
		return acct, agentErr(agentapi.CodePermission, fmt.Sprintf("account %s is a %s, not a tenant", acct.Name, acct.Role), "")
	}
	s.tokMu.Lock()
	if len(s.tokens) > 10000 {
		clear(s.tokens)
	}
	s.tokens[key] = tokenEntry{acct, now.Add(time.Minute)}
	s.tokMu.Unlock()
	return acct, nil
}
