package faas

// Attach: an accelerator from the registry's pool (sdk/poolapi), used
// through the same *Device as a local slot.

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
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
}

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
	reg    *registryAPI
	client *Client
	dev    *Device

	stop      context.CancelFunc
	renewDone chan struct{}
	lost      chan struct{}
	mu        sync.Mutex
	err       error
}

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
func Attach(ctx context.Context, registryURL, listing string, opts ...AttachOption) (*Attachment, error) {
	o := attachOptions{ua: defaultUA}
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
	var info poolapi.Attachment
	if err := reg.do(ctx, http.MethodPost, "/attachments", req, &info); err != nil {
		return nil, err
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
		return nil, err
	}
	if err := a.open(ctx, cred, o); err != nil {
		return nil, err
	}
	if o.noRenew {
		a.stopRenewal()
	}
	ok = true
	return a, nil
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
		var next poolapi.Attachment
		if err := a.reg.do(ctx, http.MethodGet, "/attachments/"+url.PathEscape(info.ID)+"?wait=30s&since="+string(info.State), nil, &next); err != nil {
			return err
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
	var info poolapi.Attachment
	err := a.reg.do(ctx, http.MethodDelete, "/attachments/"+url.PathEscape(a.id), nil, &info)
	if err != nil {
		return err
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
	_ = a.reg.do(ctx, http.MethodDelete, "/attachments/"+url.PathEscape(a.id), nil, nil)
}
