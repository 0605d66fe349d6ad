// Package registryclient is the client of the registry's REST API
// (/api/v1, whose contract is sdk/registryapi and sdk/poolapi): one
// Client for every caller — the SDK, the node agent, the CLIs, the demo,
// the portal (through an in-process transport) and the test rigs — with
// one error type, *Error, and one way to read lists (List, ListAll).
//
// Credentials are options: WithToken for an API token, WithBasicAuth for
// an account name with a password or token; As returns the same client
// with other credentials, for a caller acting for several accounts.
package registryclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// DefaultTimeout bounds a request when no HTTP client is given: above the
// longest long poll of the API (30 s), so that those end on the server's
// terms.
const DefaultTimeout = 90 * time.Second

// MaxAnswerBytes bounds what the client reads of any answer.
const MaxAnswerBytes = 8 << 20

// Client calls one registry's /api/v1 as one account (or anonymously).
// It is safe for concurrent use.
type Client struct {
	base string // scheme://host[:port]
	host string
	hc   *http.Client
	cred func(*http.Request) // nil: anonymous
	ua   string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sets the HTTP client (its timeout, TLS configuration and
// transport).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTransport sends requests through rt, with DefaultTimeout: the
// portal's in-process transport, say.
func WithTransport(rt http.RoundTripper) Option {
	return func(c *Client) { c.hc = &http.Client{Transport: rt, Timeout: DefaultTimeout} }
}

// WithToken authenticates with an API token (Bearer).
func WithToken(token string) Option { return func(c *Client) { c.cred = bearer(token) } }

// WithBasicAuth authenticates as account user with a password or an API
// token (HTTP Basic), as node agents and operators' scripts do.
func WithBasicAuth(user, secret string) Option {
	return func(c *Client) {
		c.cred = func(r *http.Request) { r.SetBasicAuth(user, secret) }
	}
}

// WithUserAgent sets the User-Agent of requests.
func WithUserAgent(ua string) Option { return func(c *Client) { c.ua = ua } }

func bearer(token string) func(*http.Request) {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+token) }
}

// New returns a client of the registry at base ("https://reg:5000").
func New(base string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(base, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, fmt.Errorf("registryclient: registry URL %q: want http(s)://host[:port]", base)
	}
	c := &Client{base: u.Scheme + "://" + u.Host, host: u.Host, ua: "faas-registryclient"}
	for _, o := range opts {
		o(c)
	}
	if c.hc == nil {
		c.hc = &http.Client{Timeout: DefaultTimeout}
	}
	return c, nil
}

// As returns the client with the credentials of another account: an API
// token, or nil options for an anonymous caller.
func (c *Client) As(opts ...Option) *Client {
	d := *c
	d.cred = nil
	for _, o := range opts {
		o(&d)
	}
	return &d
}

// Base is the registry's URL, scheme://host[:port].
func (c *Client) Base() string { return c.base }

// Host is the registry's host[:port], as image references name it.
func (c *Client) Host() string { return c.host }

// Insecure reports whether the registry is reached over plain HTTP.
func (c *Client) Insecure() bool { return strings.HasPrefix(c.base, "http:") }

// Do sends method path (under registryapi.Prefix; a query may follow) with
// in as its JSON body when not nil, and decodes a successful answer into
// out when not nil (a *[]byte out gets the answer's bytes as they are, for
// answers other than JSON). Every failure is an *Error, but for a done ctx, which
// returns ctx's error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	ctype := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			op, _, _ := strings.Cut(path, "?")
			return fmt.Errorf("registryclient: %s %s: encoding the body: %w", method, registryapi.Prefix+op, err)
		}
		body, ctype = bytes.NewReader(b), "application/json"
	}
	return c.send(ctx, method, path, ctype, body, out)
}

// DoRaw is Do with a body that is not JSON: body's bytes, sent as
// Content-Type ctype (a logo's image, say).
func (c *Client) DoRaw(ctx context.Context, method, path, ctype string, body []byte, out any) error {
	return c.send(ctx, method, path, ctype, bytes.NewReader(body), out)
}

// send sends method path with body (nil: none) of Content-Type ctype.
func (c *Client) send(ctx context.Context, method, path, ctype string, body io.Reader, out any) error {
	op, _, _ := strings.Cut(path, "?")
	op = registryapi.Prefix + op
	req, err := http.NewRequestWithContext(ctx, method, c.base+registryapi.Prefix+path, body)
	if err != nil {
		return fmt.Errorf("registryclient: %s %s: %w", method, op, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)
	if c.cred != nil {
		c.cred(req)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Method: method, Path: op, Message: "registry " + c.host + " unreachable", Err: err}
	}
	defer resp.Body.Close()
	if err := CheckError(resp); err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerBytes+1))
	if err == nil && len(data) > MaxAnswerBytes {
		err = fmt.Errorf("answer over %d bytes", MaxAnswerBytes)
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &Error{Method: method, Path: op, Status: resp.StatusCode, Message: "reading the answer", Err: err}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		*raw = data
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &Error{Method: method, Path: op, Status: resp.StatusCode, Message: "malformed answer", Err: err}
	}
	return nil
}
