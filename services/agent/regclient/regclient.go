// Package regclient is the node agent's client of the registry's REST API
// (/api/v1): who a tenant token belongs to, the signing keys of a
// repository's ISV, node registration and heartbeats, key release, usage
// reports, and the accelerator pool's assignments. Image bytes do not go through it: the agent pulls those with
// go-containerregistry against /v2.
//
// The agent authenticates as its node account (HTTP Basic with the account
// name and an API token); tenant tokens are only ever passed to Me and
// LoadGrant.
//
// Usage is not sent once and forgotten: QueueUsage keeps reports in memory
// (and in a spool directory, SpoolUsage, so that a restart loses none)
// and sends them again, with backoff, while the registry cannot take them
// for a reason that passes ([Temporary]: unreachable, 5xx such as the 503
// of a database that is out of disk space, read-only or down, 429). Errors
// that come from an answer of the registry wrap a [StatusError] with its
// status, code and Retry-After.
package regclient

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Error categories; every error of this package wraps one of them.
var (
	// ErrUnavailable: the registry could not be reached or failed (5xx).
	ErrUnavailable = errors.New("registry unavailable")
	// ErrUnauthenticated: the registry refused the credentials (401).
	ErrUnauthenticated = errors.New("registry refused the credentials")
	// ErrDenied: the registry refused the request for this caller (403).
	ErrDenied = errors.New("registry denied the request")
	// ErrNotFound: the registry does not know the object (404).
	ErrNotFound = errors.New("not found in the registry")
	// ErrConflict: the object's state forbids the request (409).
	ErrConflict = errors.New("registry conflict")
	// ErrNodeUntrusted: the registry does not trust this node (yet): an
	// operator has not approved it, or revoked it. Such errors also wrap
	// ErrDenied.
	ErrNodeUntrusted = errors.New("the registry does not trust this node")
)

// StatusError is an answer of the registry other than a success; errors
// of this package that come from an answer wrap one.
type StatusError struct {
	Status     int    // HTTP status
	Code       string // the error envelope's code, e.g. "unavailable"; "" if none
	Message    string // the registry's message, for people
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return fmt.Sprintf("%d %s", e.Status, e.Message) }

// Temporary reports whether a request that failed with err may succeed
// when sent again unchanged: the registry could not be reached, or it
// answered 408, 429 or 5xx (a 503 whose database is out of disk space,
// read-only or unreachable, say). A refusal of the request itself (other
// 4xx) is not temporary.
func Temporary(err error) bool {
	var se *StatusError
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &se):
		return se.Status == http.StatusRequestTimeout || se.Status == http.StatusTooManyRequests || se.Status >= 500
	}
	// Not reached, or no answer in time.
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// maxBody bounds what the client reads of any answer.
const maxBody = 4 << 20

// Client talks to one registry.
type Client struct {
	base  *url.URL
	http  *http.Client
	user  string // node account
	token string // node account's API token

	enrollment string // one-time enrollment token, for RegisterNode

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
// for this node (POST /api/v1/node-enrollments); RegisterNode sends it.
func (c *Client) WithEnrollmentToken(token string) *Client {
	c.enrollment = token
	return c
}

// New returns a client of the registry at base (e.g. "https://reg:5000")
// authenticating as node account user with token. hc nil means a client
// with a 30 s timeout.
func New(base, user, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("regclient: registry URL %q: want http(s)://host[:port]", base)
	}
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	return &Client{base: u, http: hc, user: user, token: token, log: slog.New(slog.DiscardHandler)}, nil
}

// Host is the registry's host[:port], as image references name it.
func (c *Client) Host() string { return c.base.Host }

// Insecure reports whether the registry is reached over plain HTTP.
func (c *Client) Insecure() bool { return c.base.Scheme == "http" }

// Account is who a token belongs to.
type Account struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Role string `json:"role"`
}

// Me returns the account of a tenant's API token.
func (c *Client) Me(ctx context.Context, token string) (Account, error) {
	var a Account
	err := c.do(ctx, http.MethodGet, "/me", nil, &a, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+token)
	})
	return a, err
}

// SigningKeys returns the unrevoked signing keys of the ISV owning repo.
// Keys the agent cannot parse are left out.
func (c *Client) SigningKeys(ctx context.Context, repo string) (isv string, keys []crypto.PublicKey, err error) {
	var rk registryapi.RepositoryKeys
	if err := c.do(ctx, http.MethodGet, "/signing-keys?repository="+url.QueryEscape(repo), nil, &rk, c.node); err != nil {
		return "", nil, err
	}
	for _, k := range rk.Keys {
		if pk, err := sign.LoadPublicKey([]byte(k.PublicKey)); err == nil {
			keys = append(keys, pk)
		}
	}
	return rk.ISV, keys, nil
}

// RegisterNode registers this node with its X25519 public key and returns
// its id. With the one-time enrollment token of the client
// (WithEnrollmentToken) the registry approves the node at once; without,
// it releases no key to the node until an operator approves it.
func (c *Client) RegisterNode(ctx context.Context, hostname string, pub *ecdh.PublicKey) (string, error) {
	var n registryapi.Node
	in := map[string]string{"hostname": hostname, "public_key": base64.StdEncoding.EncodeToString(pub.Bytes())}
	if c.enrollment != "" {
		in["enrollment_token"] = c.enrollment
	}
	err := c.do(ctx, http.MethodPost, "/nodes", in, &n, c.node)
	return n.ID, err
}

// LoadGrant asks the registry, with a tenant's token, for a grant that lets
// this node load req's image for that tenant. The node presents it to
// ReleaseKeys and names it in usage reports.
func (c *Client) LoadGrant(ctx context.Context, tenantToken string, req registryapi.GrantRequest) (registryapi.Grant, error) {
	var g registryapi.Grant
	err := c.do(ctx, http.MethodPost, "/load-grants", req, &g, func(r *http.Request) {
		r.Header.Set("Authorization", "Bearer "+tenantToken)
	})
	return g, err
}

// HeartbeatOption adds to a heartbeat.
type HeartbeatOption func(map[string]any)

// WithEndpoint reports where the node serves remote attach and the PEM of
// the certificate it serves there, which the registry pins.
func WithEndpoint(endpoint string, certPEM []byte) HeartbeatOption {
	return func(body map[string]any) {
		body["endpoint"], body["tls_certificate"] = endpoint, string(certPEM)
	}
}

// Heartbeat reports the node's boards and slots.
func (c *Client) Heartbeat(ctx context.Context, nodeID string, boards []registryapi.Board, opts ...HeartbeatOption) error {
	body := map[string]any{"boards": boards}
	for _, o := range opts {
		o(body)
	}
	return c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(nodeID)+"/heartbeat", body, nil, c.node)
}

// ReportUsage sends usage records; the registry skips report ids it has.
func (c *Client) ReportUsage(ctx context.Context, nodeID string, recs []registryapi.UsageRecord) error {
	return c.do(ctx, http.MethodPost, "/usage", map[string]any{"node_id": nodeID, "records": recs}, nil, c.node)
}

// ReleaseKeys asks for the data keys of a sealed image for a tenant,
// wrapped to this node's key.
func (c *Client) ReleaseKeys(ctx context.Context, req registryapi.KeyRelease) ([]registryapi.WrappedKey, error) {
	var resp registryapi.KeyReleaseResult
	err := c.do(ctx, http.MethodPost, registryapi.KeyReleasePath, req, &resp, c.node)
	return resp.WrappedKeys, err
}

// MaxAssignmentsWait is the longest Assignments waits: the client's
// requests time out after 30 s.
const MaxAssignmentsWait = 20 * time.Second

// Assignments returns the node's desired state in the accelerator pool
// (sdk/poolapi) once its revision passes since, or after wait (at most
// MaxAssignmentsWait) with the same revision.
func (c *Client) Assignments(ctx context.Context, nodeID string, since int64, wait time.Duration) (poolapi.Assignments, error) {
	var as poolapi.Assignments
	wait = min(max(wait, 0), MaxAssignmentsWait)
	path := fmt.Sprintf("/nodes/%s/assignments?since=%d&wait=%dms", url.PathEscape(nodeID), since, wait.Milliseconds())
	err := c.do(ctx, http.MethodGet, path, nil, &as, c.node)
	return as, err
}

// AttachmentGrant asks for a load grant of attachment aid's image for its
// tenant: the node loads for a tenant whose token it never holds.
func (c *Client) AttachmentGrant(ctx context.Context, nodeID, aid string) (registryapi.Grant, error) {
	var g registryapi.Grant
	err := c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(nodeID)+"/attachments/"+url.PathEscape(aid)+"/grant", nil, &g, c.node)
	return g, err
}

// ReportAttachment reports the state of attachment aid on this node.
func (c *Client) ReportAttachment(ctx context.Context, nodeID, aid string, r poolapi.StateReport) error {
	return c.do(ctx, http.MethodPost, "/nodes/"+url.PathEscape(nodeID)+"/attachments/"+url.PathEscape(aid)+"/state", r, nil, c.node)
}

// NodeAuth returns the node account's credentials, with which the node
// pulls what the pool assigned it.
func (c *Client) NodeAuth() (user, token string) { return c.user, c.token }

func (c *Client) node(r *http.Request) { r.SetBasicAuth(c.user, c.token) }

// do sends a JSON request to path under /api/v1 and decodes the answer.
func (c *Client) do(ctx context.Context, method, path string, in, out any, auth func(*http.Request)) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+registryapi.Prefix+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	auth(req)
	op := method + " " + registryapi.Prefix + strings.SplitN(path, "?", 2)[0]
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %s: %v", ErrUnavailable, op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return fmt.Errorf("%w: %s: reading the answer: %v", ErrUnavailable, op, err)
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(data, &e)
		msg := e.Error.Message
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		se := &StatusError{Status: resp.StatusCode, Code: e.Error.Code, Message: msg}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			se.RetryAfter = time.Duration(s) * time.Second
		}
		var cat error
		switch {
		case resp.StatusCode == http.StatusUnauthorized:
			cat = ErrUnauthenticated
		case resp.StatusCode == http.StatusForbidden && e.Error.Code == "node_untrusted":
			return fmt.Errorf("%w: %w: %s: %w", ErrDenied, ErrNodeUntrusted, op, se)
		case resp.StatusCode == http.StatusForbidden:
			cat = ErrDenied
		case resp.StatusCode == http.StatusNotFound:
			cat = ErrNotFound
		case resp.StatusCode == http.StatusConflict:
			cat = ErrConflict
		default:
			cat = ErrUnavailable
		}
		return fmt.Errorf("%w: %s: %w", cat, op, se)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: %s: malformed answer: %v", ErrUnavailable, op, err)
	}
	return nil
}
