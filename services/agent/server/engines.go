package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// Engines loads one image (the AliDNN engine) onto chips on demand as one
// registry account, and clears the chips it loaded: the device plugin's
// shares on empty chips (deviceplugin.Config.Engines). The account is the
// operator's, subscribed to the image's listing: it is the loader of
// record, so the engine's time on the chip is its usage; the pods on the
// shares are tenants of their own windows (grants.go).
//
// Its loads are ordinary loads of that account (GET /v1/loads lists them
// to the operator), so every rule of the loader applies: entitlement,
// signature, the node's limit on concurrent loads.
type Engines struct {
	s            *Server
	image, token string

	mu      sync.Mutex
	account string // the token's account, once the registry has named it
}

// Engines returns the on-demand loader of image, loading as the account
// whose registry API token is token.
func (s *Server) Engines(image, token string) *Engines {
	return &Engines{s: s, image: image, token: token}
}

// Image is the reference the engines load.
func (e *Engines) Image() string { return e.image }

// principal waits until the server serves (its loads run under Serve's
// context, and the device plugin may ask before), then checks the token
// with the registry (cached, as every caller's is) and remembers its
// account.
func (e *Engines) principal(ctx context.Context) (*principal, error) {
	select {
	case <-e.s.serving:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for faasd to serve: %w", ctx.Err())
	}
	acct, err := e.s.checkToken(ctx, e.token)
	if err != nil {
		return nil, fmt.Errorf("the account that loads engines for shares: %w", err)
	}
	e.mu.Lock()
	e.account = acct.Name
	e.mu.Unlock()
	return &principal{tenant: acct.Name, tenantID: acct.ID, token: e.token}, nil
}

// LoadEngine loads the image onto slot i and returns when the load has
// ended; a failed load's error carries the loader's message and hint.
func (e *Engines) LoadEngine(ctx context.Context, i int) error {
	p, err := e.principal(ctx)
	if err != nil {
		return err
	}
	run, err := e.s.beginLoad(p, agentapi.LoadRequest{Image: e.image, Slot: &i}, false)
	if err != nil {
		return err
	}
	l, err := run.wait(ctx)
	if err != nil {
		return fmt.Errorf("loading %s onto slot %d: %w", e.image, i, err)
	}
	if l.State != agentapi.LoadDone {
		we := l.Error
		if we == nil {
			we = &agentapi.Error{Code: agentapi.CodeInternal, Message: "the load failed"}
		}
		msg := fmt.Sprintf("loading %s onto slot %d as %s: %s", e.image, i, p.tenant, we.Message)
		if we.Hint != "" {
			// The kubelet shows only the message: the hint goes with it.
			msg += " (" + we.Hint + ")"
		}
		return &apiError{agentapi.Error{Code: we.Code, Hint: we.Hint, Message: msg}}
	}
	return nil
}

// Loaded reports whether slot i holds an image these engines loaded: one
// loaded by their account, which a faasd before a restart may have done.
// Until the registry has named the account, it reports false.
func (e *Engines) Loaded(ctx context.Context, i int) bool {
	e.mu.Lock()
	acct := e.account
	e.mu.Unlock()
	if acct == "" {
		p, err := e.principal(ctx)
		if err != nil {
			return false
		}
		acct = p.tenant
	}
	rec := e.s.cfg.Slots.Record(i)
	return rec.Tenant == acct && (rec.State == agentapi.Loaded || rec.State == agentapi.Busy)
}

// ClearEngine clears slot i if these engines' account loaded it, ending
// the sessions there; a slot anyone else loaded is left alone.
func (e *Engines) ClearEngine(ctx context.Context, i int) error {
	p, err := e.principal(ctx)
	if err != nil {
		return err
	}
	return e.s.clear(ctx, i, func(j int, r slots.Record) error {
		if r.Tenant != p.tenant || (r.State != agentapi.Loaded && r.State != agentapi.Busy) {
			return agentErr(agentapi.CodePermission, fmt.Sprintf("slot %d holds no engine loaded for shares", j), "")
		}
		return nil
	})
}
