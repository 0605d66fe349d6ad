package loader

// The key phase and what the registry is told of a load: the load grant
// (asked for with the tenant's token while verify and pull run), the data
// keys released against it, and the usage report that names it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// spendHint is what a tenant does about a load refused at its spend limit.
const spendHint = "raise your spend limit (portal: Spend limit) or wait until the month ends; what runs is not stopped"

// askGrant starts asking the registry for the grant of this load.
func (r *run) askGrant(ctx context.Context, repo, digest string) {
	r.grantDone = make(chan struct{})
	go func() {
		defer close(r.grantDone)
		if g := r.req.Tenant.Grant; g != nil {
			if g.NodeID != r.l.cfg.NodeID || g.Repository != repo || g.Digest != digest {
				r.grantErr = fail(agentapi.CodeNotEntitled, "", "the pool's load grant is for %s@%s, not %s@%s", g.Repository, g.Digest, repo, digest)
				return
			}
			r.grant = *g
			return
		}
		if r.req.Tenant.Token == "" {
			r.grantErr = fail(agentapi.CodeNotEntitled, "load as a tenant (faas login)", "a load without a tenant's token gets no load grant")
			return
		}
		r.grant, r.grantErr = r.l.cfg.Registry.TenantGrant(ctx, r.req.Tenant.Token,
			registryapi.GrantRequest{NodeID: r.l.cfg.NodeID, Repository: repo, Digest: digest})
	}()
}

// waitGrant returns the load grant, or why there is none.
func (r *run) waitGrant(ctx context.Context) (registryapi.Grant, error) {
	if r.grantDone == nil {
		return registryapi.Grant{}, errors.New("loader: no grant was asked for")
	}
	select {
	case <-r.grantDone:
	case <-ctx.Done():
		return registryapi.Grant{}, ctx.Err()
	}
	err := r.grantErr
	var le *Error
	switch {
	case err == nil:
		return r.grant, nil
	case errors.As(err, &le):
		return registryapi.Grant{}, err
	case errors.Is(err, registryclient.ErrNodeUntrusted):
		return registryapi.Grant{}, &Error{Code: agentapi.CodeUnavailable, Hint: "an operator approves this node in the registry (registry nodes approve)",
			Err: fmt.Errorf("the registry does not trust this node: no load grant: %w", err)}
	case errors.Is(err, registryclient.ErrSpendLimit):
		return registryapi.Grant{}, &Error{Code: agentapi.CodeSpendLimit, Hint: spendHint,
			Err: fmt.Errorf("the registry granted no load: %w", err)}
	case errors.Is(err, registryclient.ErrDenied):
		return registryapi.Grant{}, &Error{Code: agentapi.CodeNotEntitled, Hint: "subscribe to the listing first",
			Err: fmt.Errorf("the registry granted no load: %w", err)}
	case errors.Is(err, registryclient.ErrUnauthenticated):
		return registryapi.Grant{}, &Error{Code: agentapi.CodeUnauthenticated, Hint: "faas login again",
			Err: fmt.Errorf("the registry refused the tenant's token for a load grant: %w", err)}
	}
	return registryapi.Grant{}, fmt.Errorf("load grant: %w", err)
}

// keys obtains and unwraps the data keys of the sealed targets.
func (r *run) keys(ctx context.Context, ref name.Reference, digest string, ts []*target) error {
	sealed := false
	for _, t := range ts {
		sealed = sealed || t.sealed
	}
	if !sealed {
		return nil
	}
	r.begin(agentapi.PhaseKey)
	l := r.l
	g, err := r.waitGrant(ctx)
	if err != nil {
		return err
	}
	wrapped, err := l.cfg.Registry.ReleaseKeys(ctx, registryapi.KeyRelease{
		NodeID: l.cfg.NodeID, TenantID: r.req.Tenant.ID, Repository: ref.Context().RepositoryStr(), Digest: digest, Grant: g.Secret,
	})
	switch {
	case errors.Is(err, registryclient.ErrNodeUntrusted):
		return &Error{Code: agentapi.CodeUnavailable, Hint: "an operator approves this node in the registry (registry nodes approve)",
			Err: fmt.Errorf("the registry does not trust this node: it released no key for %s: %w", digest, err)}
	case errors.Is(err, registryclient.ErrDenied):
		return &Error{Code: agentapi.CodeNotEntitled, Hint: "subscribe to the listing first", Err: fmt.Errorf("the registry released no key for %s: %w", digest, err)}
	case errors.Is(err, registryclient.ErrConflict):
		return &Error{Code: agentapi.CodeCountersign, Hint: "load a validated version", Err: fmt.Errorf("the registry released no key for %s: %w", digest, err)}
	case err != nil:
		return fmt.Errorf("key release for %s: %w", digest, err)
	}
	for _, t := range ts {
		if !t.sealed {
			continue
		}
		i := slices.IndexFunc(wrapped, func(w registryapi.WrappedKey) bool { return w.Layer == t.chip.Layer.String() })
		if i < 0 {
			return fail(agentapi.CodeCountersign, "", "the registry released no key for layer %s", t.chip.Layer)
		}
		wk, err := parseWrapped(wrapped[i].WrappedKey)
		if err != nil {
			return fmt.Errorf("key release: layer %s: %w", t.chip.Layer, err)
		}
		if t.key, err = seal.UnwrapKey(l.cfg.NodeKey, wk); err != nil {
			return fail(agentapi.CodeSignature, "", "the key released for layer %s does not open with this node's key: %v", t.chip.Layer, err)
		}
	}
	return nil
}

// report records the load as usage in the registry, in the background.
func (l *Loader) report(req Request, res Result, grantID string) {
	if l.cfg.NodeID == "" || req.Tenant.ID == "" || grantID == "" {
		return
	}
	now := time.Now().UTC()
	d := res.Image.Digest
	var recs []registryapi.UsageRecord
	for _, s := range res.Slots {
		slot := s
		recs = append(recs, registryapi.UsageRecord{ReportID: fmt.Sprintf("%s/%d", req.ID, s), TenantID: req.Tenant.ID, GrantID: grantID, ManifestDigest: &d, Slot: &slot, Event: "load", StartedAt: &now})
	}
	// Queued: sent in the background, and kept to send again while the
	// registry is away or cannot write (503).
	l.cfg.Registry.QueueUsage(l.cfg.NodeID, recs)
}
