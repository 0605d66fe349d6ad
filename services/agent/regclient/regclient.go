// Package regclient is the node agent's side of the registry: the
// registry's client (sdk/registryclient) as the node account, with what
// only a node does on top — registering with its X25519 key, checking who
// a tenant token belongs to and asking a grant with it, reading an ISV's
// verifying keys, and reporting usage. Image bytes do not go through it:
// the agent pulls those with go-containerregistry against /v2.
//
// The agent authenticates as its node account (HTTP Basic with the account
// name and an API token); tenant tokens are only ever passed to Tenant and
// TenantGrant.
//
// Usage is not sent once and forgotten: QueueUsage keeps reports in memory
// (and in a spool directory, SpoolUsage, so that a restart loses none)
// and sends them again, with backoff, while the registry cannot take them
// for a reason that passes (registryclient.Temporary: unreachable, 5xx
// such as the 503 of a database that is out of disk space, read-only or
// down, 429).
package regclient

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"encoding/base64"
	"log/slog"
	"net/http"
	"time"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// Client talks to one registry as a node account.
type Client struct {
	*registryclient.Client // as the node account

	user  string // node account
	token string // node account's API token

	enrollment string // one-time enrollment token, for Register

	log   *slog.Logger
	usage usageQueue
}

// WithLogger sets where the client logs what happens in the background
// (usage reports it keeps for later); by default nowhere.
func (c *Client) WithLogger(l *slog.Logger) *Client {
	if l != nil {
		c.log = l
	}
	return c
}

// WithEnrollmentToken sets the one-time enrollment token an operator made
// for this node (POST /api/v1/node-enrollments); Register sends it.
func (c *Client) WithEnrollmentToken(token string) *Client {
	c.enrollment = token
	return c
}

// DefaultTimeout bounds each request when New is given no HTTP client.
const DefaultTimeout = 30 * time.Second

// MaxAssignmentsWait is the longest the agent's long polls of its
// assignments wait: below DefaultTimeout, so that the poll ends first.
const MaxAssignmentsWait = 20 * time.Second

// New returns a client of the registry at base (e.g. "https://reg:5000")
// authenticating as node account user with token. hc nil means a client
// with DefaultTimeout.
func New(base, user, token string, hc *http.Client) (*Client, error) {
	if hc == nil {
		hc = &http.Client{Timeout: DefaultTimeout}
	}
	rc, err := registryclient.New(base, registryclient.WithHTTPClient(hc), registryclient.WithBasicAuth(user, token),
		registryclient.WithUserAgent("faasd"))
	if err != nil {
		return nil, err
	}
	return &Client{Client: rc, user: user, token: token, log: slog.New(slog.DiscardHandler)}, nil
}

// Tenant returns the account of a tenant's API token.
func (c *Client) Tenant(ctx context.Context, token string) (registryapi.Account, error) {
	return c.As(registryclient.WithToken(token)).Me(ctx)
}

// TenantGrant asks the registry, with a tenant's token, for a grant that
// lets this node load req's image for that tenant. The node presents it to
// ReleaseKeys and names it in usage reports.
func (c *Client) TenantGrant(ctx context.Context, tenantToken string, req registryapi.GrantRequest) (registryapi.Grant, error) {
	return c.As(registryclient.WithToken(tenantToken)).LoadGrant(ctx, req)
}

// VerifyingKeys returns the unrevoked signing keys of the ISV owning repo.
// Keys the agent cannot parse are left out.
func (c *Client) VerifyingKeys(ctx context.Context, repo string) (isv string, keys []crypto.PublicKey, err error) {
	rk, err := c.RepositoryKeys(ctx, repo)
	if err != nil {
		return "", nil, err
	}
	for _, k := range rk.Keys {
		if pk, err := sign.LoadPublicKey([]byte(k.PublicKey)); err == nil {
			keys = append(keys, pk)
		}
	}
	return rk.ISV, keys, nil
}

// Register registers this node with its X25519 public key and returns its
// id. With the one-time enrollment token of the client
// (WithEnrollmentToken) the registry approves the node at once; without,
// it releases no key to the node until an operator approves it.
func (c *Client) Register(ctx context.Context, hostname string, pub *ecdh.PublicKey) (string, error) {
	n, err := c.RegisterNode(ctx, registryapi.NodeRegistration{Hostname: hostname,
		PublicKey: base64.StdEncoding.EncodeToString(pub.Bytes()), EnrollmentToken: c.enrollment})
	return n.ID, err
}

// NodeAuth returns the node account's credentials, with which the node
// pulls what the pool assigned it.
func (c *Client) NodeAuth() (user, token string) { return c.user, c.token }
