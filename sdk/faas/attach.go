package faas

// Attach: an accelerator from the registry's pool (sdk/poolapi), used
// through the same *Device as a local slot.

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// AttachOption configures Attach.
type AttachOption func(*attachOptions)

type attachOptions struct {
	token    string
	share    bool
	lease    time.Duration
	hc       *http.Client
	local    string
	progress func(poolapi.State)
	ua       string
	noRenew  bool
	attempts int
}

// DefaultAttachAttempts is how many placements Attach tries by default.
const DefaultAttachAttempts = 3

// WithAttachAttempts sets how many placements Attach tries in all: when
// an attachment fails (its node could not load the image: ErrAttachFailed),
// Attach asks the registry for another, away from the nodes where it
// failed, up to n attempts (n < 1 is 1; the default DefaultAttachAttempts).
// Other errors end Attach at once: they would not differ on another node.
func WithAttachAttempts(n int) AttachOption { return func(o *attachOptions) { o.attempts = max(n, 1) } }

// WithRegistryToken sets the tenant's registry API token; the default is
// StoredLogin's.
func WithRegistryToken(tok string) AttachOption { return func(o *attachOptions) { o.token = tok } }

// Shared asks for a tenant window on a chip, possibly one already running
// the image for other tenants, instead of whole chips.
func Shared() AttachOption { return func(o *attachOptions) { o.share = true } }

// WithLease sets the lease the SDK renews (whole seconds, between
// poolapi.MinLeaseSeconds and MaxLeaseSeconds); the default is the
// registry's, 30 s. A client that stops renewing loses the attachment
// one lease later.
func WithLease(d time.Duration) AttachOption { return func(o *attachOptions) { o.lease = d } }

// WithRegistryHTTPClient sends the registry requests with hc.
func WithRegistryHTTPClient(hc *http.Client) AttachOption {
	return func(o *attachOptions) { o.hc = hc }
}

// WithLocalAgent names this host's faasd (a socket path), used instead of
// TLS when the attachment lands on this host; "" (the default) is
// $FAAS_AGENT or agentapi.DefaultSocket, "-" none.
func WithLocalAgent(target string) AttachOption { return func(o *attachOptions) { o.local = target } }

// WithAttachProgress calls fn with each state the attachment passes on its
// way to ready.
func WithAttachProgress(fn func(poolapi.State)) AttachOption {
	return func(o *attachOptions) { o.progress = fn }
}

// WithAttachUserAgent sets the User-Agent of the registry's and the
// node's requests.
func WithAttachUserAgent(ua string) AttachOption { return func(o *attachOptions) { o.ua = ua } }

// WithoutRenewal leaves the lease to the caller (Renew): for a command
// that attaches and exits.
func WithoutRenewal() AttachOption { return func(o *attachOptions) { o.noRenew = true } }

// Attachment is an accelerator of the pool, held under a lease that the
// SDK renews until Detach or Close.
type Attachment struct {
	id     string
	info   poolapi.Attachment // under mu
	cred   string
	reg    *registryclient.Client
	client *Client
	dev    *Device

	stop      context.CancelFunc
	renewDone chan struct{}
	lost      chan struct{}
	mu        sync.Mutex
	err       error
	// attempts are the placements Attach tried, this one last.
	attempts []poolapi.Attempt
}

// AttachError is Attach's error once the registry placed at least one
// attachment: every attempt (node and why it ended), and the last error,
// which it wraps (ErrAttachFailed when the last node failed too,
// ErrNoCapacity when no other node had room, ...).
type AttachError struct {
	Attempts []poolapi.Attempt
	Err      error
}

func (e *AttachError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v (%d attempts:", e.Err, len(e.Attempts))
	for i, at := range e.Attempts {
		if i > 0 {
			b.WriteString(";")
		}
		if at.Attachment == "" {
			fmt.Fprintf(&b, " not placed: %s", at.Error)
			continue
		}
		fmt.Fprintf(&b, " node %s slot %d %s", cmp.Or(at.Node, at.NodeID), at.Slot, at.State)
		if at.Error != "" {
			fmt.Fprintf(&b, ": %s", at.Error)
		}
	}
	b.WriteString(")")
	return b.String()
}

func (e *AttachError) Unwrap() error { return e.Err }

// Attempts are the placements Attach tried before it got this
// attachment, and this one last: where each was placed and why it failed.
func (a *Attachment) Attempts() []poolapi.Attempt { return slices.Clone(a.attempts) }

// ID is the attachment's id.
func (a *Attachment) ID() string { return a.id }

// Info is the attachment as the registry last described it, without its
// credential.
func (a *Attachment) Info() poolapi.Attachment {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.info
}

// Credential is the attachment's credential ("faasa_…"): with it, another
// process of the tenant opens sessions on the slot (WithToken, at the
// node's endpoint). Keep it to yourself.
func (a *Attachment) Credential() string { return a.cred }

// Device is the attachment's session on its slot: the same type as a local
// Client.Open's.
func (a *Attachment) Device() *Device { return a.dev }

// Lost is closed when the attachment ended other than by Detach: its lease
// expired or its node was lost. Err says which.
func (a *Attachment) Lost() <-chan struct{} { return a.lost }

// Err is nil while the attachment lives, and then why it ended: an error
// matching ErrLeaseLost.
func (a *Attachment) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Attach asks the registry at registryURL for an accelerator running
// listing ("LISTING[:VERSION]": a listing's repository, e.g. acme/mnist,
// or its id), waits until its node has it ready, and opens a session on
// it: over TLS 1.3 to the node, whose certificate must be the one the
// registry pinned for it (never skipped), or over this host's faasd
// socket, with shared memory, when the attachment landed here. ctx bounds
// the attach; the lease is then renewed in the background.
//
// An attachment whose node fails to load the image is placed again, away
// from the nodes that failed, up to WithAttachAttempts attempts; the
// error, an *AttachError then, or the attachment's Attempts report each
// attempt.
func Attach(ctx context.Context, registryURL, listing string, opts ...AttachOption) (*Attachment, error) {
	o := attachOptions{ua: defaultUA, attempts: DefaultAttachAttempts}
	for _, f := range opts {
		f(&o)
	}
	req, err := attachRequest(listing, o)
	if err != nil {
		return nil, err
	}
	reg, err := registryFor(registryURL, opts)
	if err != nil {
		return nil, err
	}
	var attempts []poolapi.Attempt
	for {
		a, info, err := attachOnce(ctx, reg, req, o)
		at := poolapi.Attempt{Attachment: info.ID, NodeID: info.NodeID, Node: info.Node, Slot: info.Slot, State: info.State, Error: info.Error}
		switch {
		case err == nil:
			a.attempts = append(attempts, at)
			return a, nil
		case info.ID == "" && len(attempts) == 0:
			return nil, err // not placed at all: nothing to report but err
		case info.ID == "" || at.Error == "":
			at.Error = err.Error()
		}
		attempts = append(attempts, at)
		// Only a node's failure to load is worth another node: the
		// others (no room, not entitled, lease lost) would be the same
		// elsewhere.
		if !errors.Is(err, ErrAttachFailed) || info.NodeID == "" || len(attempts) >= o.attempts || ctx.Err() != nil ||
			len(req.ExcludeNodes) >= poolapi.MaxExcludeNodes {
			return nil, &AttachError{Attempts: attempts, Err: err}
		}
		if !slices.Contains(req.ExcludeNodes, info.NodeID) {
			req.ExcludeNodes = append(req.ExcludeNodes, info.NodeID)
		}
	}
}

// attachOnce asks the registry for one attachment, waits until it is
// ready and opens the session. info is the attachment as last seen (no ID
// when none was placed); an attachment that did not get ready is given
// back.
func attachOnce(ctx context.Context, reg *registryclient.Client, req poolapi.AttachRequest, o attachOptions) (_ *Attachment, info poolapi.Attachment, _ error) {
	info, err := reg.Attach(ctx, req)
	if err != nil {
		return nil, poolapi.Attachment{}, registryErr(err)
	}
	cred := info.Credential
	info.Credential = ""
	a := &Attachment{id: info.ID, info: info, cred: cred, reg: reg, lost: make(chan struct{}), renewDone: make(chan struct{})}
	// The lease runs from now: renewed while the node loads, which may
	// take longer than the lease.
	rctx, stop := context.WithCancel(context.Background())
	a.stop = stop
	go a.renew(rctx)
	ok := false
	defer func() {
		if !ok {
			a.stopRenewal()
			a.detachNow()
		}
	}()
	if err := a.waitReady(ctx, o.progress); err != nil {
		return nil, a.Info(), err
	}
	if err := a.open(ctx, cred, o); err != nil {
		return nil, a.Info(), err
	}
	if o.noRenew {
		a.stopRenewal()
	}
	ok = true
	return a, a.Info(), nil
}

// stopRenewal stops renewing the lease and waits until the renewal has.
func (a *Attachment) stopRenewal() {
	a.stop()
	<-a.renewDone
}

// attachRequest parses "LISTING[:VERSION]".
func attachRequest(listing string, o attachOptions) (poolapi.AttachRequest, error) {
	name, version, _ := strings.Cut(listing, ":")
	if name == "" || len(listing) > 256 || strings.ContainsAny(listing, " \t\n@") {
		return poolapi.AttachRequest{}, &Error{Code: agentapi.CodeBadRequest,
			Message: fmt.Sprintf("faas: attach %q: want LISTING[:VERSION], a listing's repository (acme/mnist) or id", listing)}
	}
	req := poolapi.AttachRequest{Listing: name, Version: version, Share: o.share}
	if o.lease != 0 {
		s := int(o.lease / time.Second)
		if o.lease%time.Second != 0 || s < poolapi.MinLeaseSeconds || s > poolapi.MaxLeaseSeconds {
			return req, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("faas: lease %v: want whole seconds between %ds and %ds",
				o.lease, poolapi.MinLeaseSeconds, poolapi.MaxLeaseSeconds)}
		}
		req.LeaseSeconds = s
	}
	return req, nil
}

// waitReady long-polls the attachment until it is ready, failed or ended.
func (a *Attachment) waitReady(ctx context.Context, progress func(poolapi.State)) error {
	seen := poolapi.State("")
	for {
		info := a.Info()
		if info.State != seen && progress != nil {
			progress(info.State)
		}
		seen = info.State
		switch {
		case info.State == poolapi.Ready:
			return nil
		case info.State == poolapi.Failed:
			return fmt.Errorf("%w: attachment %s on node %s: %s", ErrAttachFailed, info.ID, info.Node, info.Error)
		case !info.State.Live():
			return fmt.Errorf("%w: attachment %s is %s", ErrLeaseLost, info.ID, info.State)
		}
		next, err := a.reg.Attachment(ctx, info.ID, info.State, registryclient.MaxWait)
		if err != nil {
			return registryErr(err)
		}
		a.mu.Lock()
		a.info = next
		a.mu.Unlock()
	}
}

// open opens the session on the attachment's slot: locally when this
// host's faasd is the node, else over TLS verified against the pin.
func (a *Attachment) open(ctx context.Context, cred string, o attachOptions) error {
	info := a.Info()
	if c := a.localAgent(ctx, o.local, info.NodeID, cred); c != nil {
		dev, err := c.Open(ctx, info.Slot)
		if err == nil {
			a.client, a.dev = c, dev
			return nil
		}
		c.Close()
	}
	tc, err := PinnedTLS(info)
	if err != nil {
		return err
	}
	c, err := Dial(ctx, info.Endpoint, WithToken(cred), WithTLSConfig(tc), WithUserAgent(o.ua))
	if err != nil {
		return err
	}
	dev, err := c.Open(ctx, info.Slot)
	if err != nil {
		c.Close()
		return err
	}
	a.client, a.dev = c, dev
	return nil
}

// localAgent returns a client of this host's faasd, carrying the
// credential, when it is node nodeID, else nil. The node's id is asked
// first, without the credential, which no other node may see.
func (a *Attachment) localAgent(ctx context.Context, target, nodeID, cred string) *Client {
	if target == "-" {
		return nil
	}
	if target == "" {
		target = cmp.Or(os.Getenv("FAAS_AGENT"), agentapi.DefaultSocket)
	}
	if !strings.HasPrefix(target, "unix://") && !strings.HasPrefix(target, "/") && !strings.HasPrefix(target, ".") {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	probe, err := Dial(lctx, target)
	if err != nil {
		return nil
	}
	var n agentapi.NodeInfo
	err = probe.call(lctx, http.MethodGet, "/v1/node", nil, &n)
	probe.Close()
	if err != nil || n.NodeID == "" || n.NodeID != nodeID {
		return nil
	}
	c, err := Dial(lctx, target, WithToken(cred))
	if err != nil {
		return nil
	}
	return c
}

// PinnedTLS is the TLS configuration that trusts a's node only: TLS 1.3,
// its pinned certificate as the sole root, under its server name.
func PinnedTLS(a poolapi.Attachment) (*tls.Config, error) {
	roots := x509.NewCertPool()
	if a.TLSCertificate == "" || !roots.AppendCertsFromPEM([]byte(a.TLSCertificate)) {
		return nil, fmt.Errorf("faas: attachment %s: node %s has no usable pinned certificate; its operator sets up remote attach (faasd --listen)", a.ID, a.Node)
	}
	if a.ServerName == "" || !strings.HasPrefix(a.Endpoint, "https://") {
		return nil, fmt.Errorf("faas: attachment %s: node %s has no https endpoint and server name", a.ID, a.Node)
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, ServerName: a.ServerName}, nil
}

// Detach ends the attachment: the session closes and the registry tells
// the node to release the slot. Detaching an attachment that was lost is
// no error.
func (a *Attachment) Detach(ctx context.Context) error {
	a.stopRenewal()
	if a.dev != nil {
		a.dev.Close()
	}
	if a.client != nil {
		a.client.Close()
	}
	info, err := a.reg.Detach(ctx, a.id)
	if err != nil {
		return registryErr(err)
	}
	a.mu.Lock()
	a.info = info
	a.mu.Unlock()
	return nil
}

// Close detaches within a few seconds.
func (a *Attachment) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return a.Detach(ctx)
}

// detachNow gives back an attachment that could not be used.
func (a *Attachment) detachNow() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _ = a.reg.Detach(ctx, a.id)
}
