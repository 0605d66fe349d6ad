// Package loader turns an image reference into programmed, self-tested
// chips: the node agent's `faas load`.
//
// # Phases
//
//  1. resolve: the reference to a manifest digest, the manifest and the
//     image config, pulled with the tenant's registry credentials, so the
//     registry decides what the tenant may load;
//  2. verify: the ISV's signature against the keys the registry lists for
//     the repository's ISV now (a revoked key stops loads at once), the
//     platform's countersignature against the keys in the agent's trust
//     policy, and the image's shell range, board model and parts against
//     every target chip;
//  3. pull: each layer opened through the node cache (cache.Stream): a
//     cached layer is read from it; a layer not cached is requested now
//     and its body read in phase 5, hashed and written to the cache on the
//     way, never read back (one pass), and cached only if its digest
//     matched; concurrent loads of it wait for it to enter the cache;
//  4. key: the data keys of sealed layers, released by the registry for
//     this tenant wrapped to this node's key, against a load grant: the
//     registry gives it to the tenant's token for this node and image
//     (asked for right after resolve, so it overlaps verify and pull), and
//     every load needs one, since usage reports name it;
//  5. program: each chip's bitstream streamed from the cache or the
//     registry, unsealed on the way, into the shell's PR controller;
//  6. self-test: the role the image promised answers (package selftest).
//
// Everything that can refuse a load (1–4) runs before any chip is touched,
// so a refusal leaves every slot as it was; the exception is a streamed
// layer whose digest does not match (or that ends early): that is known
// only at its end, after its bytes reached the chip, so the load fails with
// the digest error and its target chips are wiped, as below. From phase 5 on, the target
// slots are held and recorded loading with their digest registers zeroed; the
// digests are written only after every chip passed its self-test, and any
// failure wipes every target chip (package slots), so a two-chip image
// loads both chips or neither. Slots the load does not target are never
// touched.
package loader

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// Config wires a Loader. Slots, Cache, Registry, NodeKey and PlatformKeys
// are required.
type Config struct {
	Slots    *slots.Table
	Cache    *cache.Cache
	Registry *regclient.Client
	// NodeID is this node's id in the registry, for key release and usage.
	NodeID string
	// NodeKey is the X25519 key the registry wraps data keys to.
	NodeKey *ecdh.PrivateKey
	// PlatformKeys verify the platform's countersignature: the trust policy.
	PlatformKeys []crypto.PublicKey
	// Transport carries pulls; nil means http.DefaultTransport.
	Transport http.RoundTripper
	// Metrics, if not nil, records phases, bytes and cache hits.
	Metrics *Metrics
	// Checkpoint, if not nil, is called at every step of the program phase
	// that changes a chip or the state file. Crash tests block in it
	// forever, which is what a SIGKILL at that point looks like to the
	// board and the state file.
	Checkpoint func(step string)
	Logger     *slog.Logger
}

// Loader runs loads and pulls.
type Loader struct {
	cfg Config
	log *slog.Logger
	// pick serialises the choice of slots, so that two loads without an
	// explicit slot do not pick the same free one.
	pick sync.Mutex
}

// New returns a Loader.
func New(cfg Config) (*Loader, error) {
	if cfg.Slots == nil || cfg.Cache == nil || cfg.Registry == nil || cfg.NodeKey == nil || len(cfg.PlatformKeys) == 0 {
		return nil, errors.New("loader: Slots, Cache, Registry, NodeKey and PlatformKeys are required")
	}
	if cfg.Transport == nil {
		cfg.Transport = http.DefaultTransport
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Loader{cfg: cfg, log: log}, nil
}

// Tenant is who a load is for.
type Tenant struct {
	Name  string
	ID    string
	Token string // registry API token, used to pull as the tenant
	// Grant, when the load has no Token, is a load grant the registry
	// gave this node for the tenant (an attachment of the accelerator
	// pool); the node then pulls as its own account, which the registry
	// lets pull what the pool assigned it.
	Grant *registryapi.Grant
}

// pullAuth is who pulls t's load: the tenant, or the node for a load
// under a pool's grant.
func (l *Loader) pullAuth(t Tenant) authn.Authenticator {
	if t.Token == "" && t.Grant != nil {
		user, tok := l.cfg.Registry.NodeAuth()
		return &authn.Basic{Username: user, Password: tok}
	}
	return &authn.Basic{Username: t.Name, Password: t.Token}
}

// Request is one load or pull.
type Request struct {
	ID     string // operation id, also the usage report id
	Image  string
	Slot   *int
	Tenant Tenant
	// PullOnly stops after the pull: prefetch into the cache.
	PullOnly bool
	// Pool, if not nil, is the accelerator pool's hold on the slots,
	// written in the load's own records (loading, then loaded), so that
	// faasd killed at any point of the load still knows after a restart
	// that the pool loaded them and must clear them.
	Pool *slots.Pool
	// Reserved, if not nil, reports slots the load must not take even
	// where their record would let it: those the node's accelerator pool
	// holds for attachments, whoever loaded them.
	Reserved func(slot int) bool
	// Progress, if not nil, is told about progress within phases.
	Progress func(agentapi.Event)
	// Phase, if not nil, is told when a phase starts and ends.
	Phase func(name string, done *agentapi.PhaseTime)
}

// Result is a finished load.
type Result struct {
	Image  agentapi.Image
	Slots  []int
	Phases []agentapi.PhaseTime
}

// Error is a refused or failed load: a Code for programs, a message and a
// hint for people, and the cause.
type Error struct {
	Code agentapi.Code
	Hint string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

func fail(code agentapi.Code, hint string, format string, args ...any) *Error {
	return &Error{Code: code, Hint: hint, Err: fmt.Errorf(format, args...)}
}

// target is one chip of the image placed on one slot.
type target struct {
	slot   int
	chip   image.Chip
	stream *cache.Stream // the layer, from the cache or streamed into it
	size   int64         // of the layer
	key    seal.DataKey
	sealed bool
}

// run tracks the phases of one load.
type run struct {
	l      *Loader
	req    Request
	phases []agentapi.PhaseTime
	cur    *agentapi.PhaseTime
	start  time.Time

	pmu          sync.Mutex // progress may come from the cache's download goroutine
	lastProgress time.Time

	trOnce sync.Once // the tenant's authenticated transport for blobs
	tr     http.RoundTripper
	trErr  error

	// The load grant, asked for with the tenant's token as soon as the
	// digest is known so that it overlaps verify and pull; grantDone is
	// closed when grant or grantErr is set.
	grantDone chan struct{}
	grant     registryapi.Grant
	grantErr  error
}

func (r *run) begin(name string) {
	r.end()
	r.cur = &agentapi.PhaseTime{Name: name}
	r.start = time.Now()
	if r.req.Phase != nil {
		r.req.Phase(name, nil)
	}
}

func (r *run) end() {
	if r.cur == nil {
		return
	}
	d := time.Since(r.start)
	r.cur.DurationMS = float64(d.Microseconds()) / 1000
	r.phases = append(r.phases, *r.cur)
	if r.l.cfg.Metrics != nil {
		r.l.cfg.Metrics.phase.WithLabelValues(r.cur.Name).Observe(d.Seconds())
	}
	if r.req.Phase != nil {
		r.req.Phase(r.cur.Name, r.cur)
	}
	r.cur = nil
}

// progress reports bytes done in a phase, at most every 20 ms besides the
// end, so followers are not flooded.
// checkpoint tells Config.Checkpoint about a step; "" marks a read of a
// bitstream stream, where a crash test may freeze a parallel stream too.
func (l *Loader) checkpoint(format string, args ...any) {
	if l.cfg.Checkpoint != nil {
		l.cfg.Checkpoint(fmt.Sprintf(format, args...))
	}
}

func (r *run) progress(phase string, n, total int64) {
	if r.req.Progress == nil {
		return
	}
	r.pmu.Lock()
	now := time.Now()
	if n < total && now.Sub(r.lastProgress) < 20*time.Millisecond {
		r.pmu.Unlock()
		return
	}
	r.lastProgress = now
	r.pmu.Unlock()
	r.req.Progress(agentapi.Event{Phase: phase, Bytes: n, Total: total})
}

// Load runs req. Its errors are *Error.
func (l *Loader) Load(ctx context.Context, req Request) (Result, error) {
	r := &run{l: l, req: req}
	res, err := r.load(ctx)
	r.end()
	res.Phases = r.phases
	if err != nil {
		var le *Error
		if !errors.As(err, &le) {
			err = classify(err)
		}
		l.log.WarnContext(ctx, "load failed", "op", req.ID, "image", req.Image, "tenant", req.Tenant.Name, "err", err)
		return res, err
	}
	l.log.InfoContext(ctx, "load done", "op", req.ID, "image", req.Image, "digest", res.Image.Digest,
		"slots", res.Slots, "tenant", req.Tenant.Name, "pull_only", req.PullOnly)
	return res, nil
}

func (r *run) load(ctx context.Context) (Result, error) {
	var res Result
	src, err := r.resolve(ctx, &res)
	if err != nil {
		return res, err
	}
	if r.req.PullOnly {
		var all []*target
		for _, c := range src.cfg.Chips {
			all = append(all, &target{slot: -1, chip: c})
		}
		return res, r.fetch(ctx, src.ref.Context(), src.img, all)
	}
	return res, r.loadSlots(ctx, src, &res)
}

// source is an image resolved and verified for a run.
type source struct {
	ref  name.Reference
	desc *remote.Descriptor
	img  v1.Image
	cfg  image.Config
}

// resolve reads the image's manifest and config, asks for the load's
// grant, verifies the signatures and caches the verified manifest; it
// fills res.Image.
func (r *run) resolve(ctx context.Context, res *Result) (source, error) {
	l := r.l
	r.begin(agentapi.PhaseResolve)
	ref, err := l.parseRef(r.req.Image)
	if err != nil {
		return source{}, err
	}
	opts := l.remoteOptions(ctx, r.req.Tenant)
	desc, err := remote.Get(ref, opts...)
	if err != nil {
		return source{}, pullErr(r.req.Image, err)
	}
	img, err := desc.Image()
	if err != nil {
		return source{}, fail(agentapi.CodeBadRequest, "", "%s is not an accelerator image: %v", r.req.Image, err)
	}
	cfg, err := image.ConfigOf(img)
	if err != nil {
		return source{}, fail(agentapi.CodeBadRequest, "", "%s is not an accelerator image: %v", r.req.Image, err)
	}
	digest := ref.Context().Digest(desc.Digest.String())
	if !r.req.PullOnly && l.cfg.NodeID != "" {
		r.askGrant(ctx, ref.Context().RepositoryStr(), desc.Digest.String())
	}
	res.Image = agentapi.Image{Ref: r.req.Image, Digest: desc.Digest.String(), Name: cfg.Name, Version: cfg.Version, Vendor: cfg.Vendor}

	r.begin(agentapi.PhaseVerify)
	if err := l.verify(ctx, digest, opts); err != nil {
		return source{}, err
	}
	// The manifest enters the cache only once verified: Reconcile trusts a
	// slot's digest register only for manifests found here.
	if err := l.cfg.Cache.Put(ctx, desc.Digest.String(), bytes.NewReader(desc.Manifest)); err != nil {
		return source{}, cacheErr(desc.Digest.String(), err)
	}
	// Only a blob evicted meanwhile fails, and it is no longer listed.
	_ = l.cfg.Cache.AddUser(desc.Digest.String(), r.req.Tenant.Name)
	return source{ref: ref, desc: desc, img: img, cfg: cfg}, nil
}

// loadSlots places src on slots, holds them, streams and keys the
// bitstreams, waits for the grant, programs the chips and reports the
// load; it fills res.Slots.
func (r *run) loadSlots(ctx context.Context, src source, res *Result) error {
	l := r.l
	l.pick.Lock()
	targets, err := l.place(src.cfg, r.req)
	if err == nil {
		err = l.hold(r.req, targets, res.Image)
	}
	l.pick.Unlock()
	if err != nil {
		return err
	}
	held := slotsOf(targets)
	defer l.cfg.Slots.Release(r.req.ID, held)
	// Until the program phase the chips are untouched; give the slots
	// back as they were if anything refuses the load.
	prev := make([]slots.Record, len(held))
	for i, s := range held {
		prev[i] = l.cfg.Slots.Record(s)
	}
	programmed := false
	defer func() {
		if !programmed {
			for i, s := range held {
				if rec := l.cfg.Slots.Record(s); rec.State == agentapi.Loading {
					l.cfg.Slots.Set([]int{s}, prev[i])
				}
			}
		}
	}()
	defer func() {
		for _, t := range targets {
			if t.stream != nil {
				t.stream.Close()
			}
		}
	}()
	res.Slots = held
	if err := r.open(ctx, src.ref.Context(), src.img, targets); err != nil {
		return err
	}
	if err := r.keys(ctx, src.ref, src.desc.Digest.String(), targets); err != nil {
		return err
	}
	// Every load needs its grant, sealed or not: it is what the node's
	// usage report for it must name.
	var g registryapi.Grant
	if l.cfg.NodeID != "" {
		if g, err = r.waitGrant(ctx); err != nil {
			return err
		}
	}
	programmed = true
	if err := r.program(ctx, targets, res.Image); err != nil {
		return err
	}
	l.report(r.req, *res, g.ID)
	return nil
}

// parseRef accepts references to the agent's registry, with or without its
// host.
func (l *Loader) parseRef(s string) (name.Reference, error) {
	opts := []name.Option{name.WithDefaultRegistry(l.cfg.Registry.Host())}
	if l.cfg.Registry.Insecure() {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.ParseReference(s, opts...)
	if err != nil {
		return nil, fail(agentapi.CodeBadRequest, "", "image reference %q: %v", s, err)
	}
	if got := ref.Context().RegistryStr(); got != l.cfg.Registry.Host() {
		return nil, fail(agentapi.CodeBadRequest, "name an image of "+l.cfg.Registry.Host(),
			"image %s is in registry %s; this node loads images from %s only", s, got, l.cfg.Registry.Host())
	}
	return ref, nil
}

func (l *Loader) remoteOptions(ctx context.Context, t Tenant) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(l.cfg.Transport),
		remote.WithAuth(l.pullAuth(t)),
	}
}

// verify checks the ISV signature and the platform countersignature of the
// manifest digest.
func (l *Loader) verify(ctx context.Context, d name.Digest, opts []remote.Option) error {
	repo := d.Context().RepositoryStr()
	sopts := []sign.Option{sign.WithRemoteOptions(opts...)}
	// The countersignature needs nothing from the registry's key list, so
	// it is checked while the ISV's keys are fetched and checked.
	platform := make(chan error, 1)
	go func() {
		_, err := sign.Verify(ctx, d, l.cfg.PlatformKeys, append(sopts, sign.WithIdentity(repo))...)
		platform <- err
	}()
	if err := l.verifyISV(ctx, d, repo, sopts); err != nil {
		<-platform
		return err
	}
	if err := <-platform; err != nil {
		if errors.Is(err, sign.ErrNoSignature) || errors.Is(err, sign.ErrBadSignature) {
			return fail(agentapi.CodeCountersign, "the image has not passed the registry's validation; load a validated version",
				"%s has no valid platform countersignature: %v", d, err)
		}
		return fmt.Errorf("fetching the signatures of %s: %w", d, err)
	}
	return nil
}

func (l *Loader) verifyISV(ctx context.Context, d name.Digest, repo string, sopts []sign.Option) error {
	isv, keys, err := l.cfg.Registry.VerifyingKeys(ctx, repo)
	if err != nil {
		return fmt.Errorf("signing keys of %s: %w", repo, err)
	}
	if len(keys) == 0 {
		return fail(agentapi.CodeSignature, "the ISV must register a signing key (or its key was revoked)",
			"ISV %s of %s has no registered, unrevoked signing key", isv, repo)
	}
	if _, err := sign.Verify(ctx, d, keys, sopts...); err != nil {
		if errors.Is(err, sign.ErrNoSignature) || errors.Is(err, sign.ErrBadSignature) {
			return fail(agentapi.CodeSignature, "ask the ISV to sign the image with a registered key",
				"%s carries no valid signature of ISV %s (none from its registered, unrevoked keys): %v", d, isv, err)
		}
		return fmt.Errorf("fetching the signatures of %s: %w", d, err)
	}
	return nil
}
