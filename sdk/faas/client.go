package faas

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

const (
	maxBody        = 4 << 20 // JSON answers and error bodies
	maxEventLine   = 1 << 20 // one line of an event stream
	healthzTimeout = 10 * time.Second
	defaultUA      = "faas-sdk"
)

// Client talks to one faasd. It is safe for concurrent use.
type Client struct {
	target string // as shown in errors
	base   string // URL prefix of every request, without a trailing slash
	hc     *http.Client
	token  string
	ua     string
}

// Option configures Dial.
type Option func(*options)

type options struct {
	token string
	tls   *tls.Config
	hc    *http.Client
	ua    string
}

// WithToken sends token, a registry API token ("faas_…"), as
// "Authorization: Bearer" on every request.
func WithToken(token string) Option { return func(o *options) { o.token = token } }

// WithTLSConfig sets the TLS configuration of an https target (a private
// CA, a client certificate). It is ignored for unix sockets.
func WithTLSConfig(c *tls.Config) Option { return func(o *options) { o.tls = c } }

// WithHTTPClient makes the client send its requests with c, as it is: for
// a unix target, c's transport must dial the socket itself. Meant for tests.
func WithHTTPClient(c *http.Client) Option { return func(o *options) { o.hc = c } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(o *options) { o.ua = ua } }

// Dial returns a client of the faasd at target (see the package doc for the
// forms it takes) after checking that it answers GET /healthz.
func Dial(ctx context.Context, target string, opts ...Option) (*Client, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	if target == "" {
		target = os.Getenv("FAAS_AGENT")
	}
	if target == "" {
		target = agentapi.DefaultSocket
	}
	c := &Client{target: target, token: o.token, ua: o.ua, hc: o.hc}
	if c.ua == "" {
		c.ua = defaultUA
	}
	var transport http.RoundTripper
	switch {
	case strings.HasPrefix(target, "unix://") || strings.HasPrefix(target, "/") || strings.HasPrefix(target, "."):
		path := strings.TrimPrefix(target, "unix://")
		if path == "" {
			return nil, fmt.Errorf("faas: agent target %q: no socket path", target)
		}
		c.target = path
		c.base = "http://faasd"
		transport = &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
			MaxIdleConns:    4,
			IdleConnTimeout: 90 * time.Second,
		}
	case strings.HasPrefix(target, "https://") || strings.HasPrefix(target, "http://"):
		u, err := url.Parse(target)
		if err != nil || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
			return nil, fmt.Errorf("faas: agent target %q: want https://host:port", target)
		}
		if u.Scheme == "http" && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("faas: agent target %q: plain http is allowed only on the loopback interface; use https://", target)
		}
		c.base = u.Scheme + "://" + u.Host
		t := http.DefaultTransport.(*http.Transport).Clone()
		if o.tls != nil {
			t.TLSClientConfig = o.tls.Clone()
		}
		transport = t
	default:
		return nil, fmt.Errorf("faas: agent target %q: want a socket path (unix:///path, /path, ./path) or https://host:port", target)
	}
	if c.hc == nil {
		c.hc = &http.Client{Transport: transport}
	}
	hctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, healthzTimeout)
		defer cancel()
	}
	if err := c.healthz(hctx); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	return c, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Target returns the agent's address: the socket path or the URL.
func (c *Client) Target() string { return c.target }

// Close releases idle connections.
func (c *Client) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

func (c *Client) healthz(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/healthz", nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", c.ua)
	resp, err := c.hc.Do(req)
	if err != nil {
		return &transportError{msg: "faasd is not running at " + c.target, err: err,
			hnt: "start faasd (systemctl start faasd) or give its address with --agent or $FAAS_AGENT"}
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	if resp.StatusCode != http.StatusOK {
		return &transportError{msg: fmt.Sprintf("faasd at %s is not healthy: status %d", c.target, resp.StatusCode)}
	}
	return nil
}

// send makes a request and returns the response of a 2xx status; any other
// status becomes *Error.
func (c *Client) send(ctx context.Context, method, path string, body any, accept string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &transportError{msg: fmt.Sprintf("%s %s: faasd at %s", method, path, c.target), err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, readError(resp)
}

// readError turns a failed response into *Error.
func readError(resp *http.Response) error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	var body agentapi.ErrorBody
	if json.Unmarshal(b, &body) == nil && body.Error.Code != "" {
		e.Code, e.Message, e.Hint = body.Error.Code, body.Error.Message, body.Error.Hint
		return e
	}
	// Not the agent's error document (a proxy, an old agent): classify by
	// status.
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		e.Code = agentapi.CodeUnauthenticated
	case http.StatusForbidden:
		e.Code = agentapi.CodePermission
	case http.StatusNotFound:
		e.Code = agentapi.CodeNotFound
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		e.Code = agentapi.CodeBadRequest
	case http.StatusConflict:
		e.Code = agentapi.CodeBusy
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		e.Code = agentapi.CodeUnavailable
	default:
		e.Code = agentapi.CodeInternal
	}
	e.Message = fmt.Sprintf("faasd answered %s", resp.Status)
	if s := strings.TrimSpace(string(b)); s != "" && len(s) < 200 && !strings.ContainsAny(s, "\n\r") {
		e.Message += ": " + s
	}
	return e
}

// call makes a request and decodes its JSON answer into out.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.send(ctx, method, path, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transportError{msg: fmt.Sprintf("%s %s: reading the answer of faasd at %s", method, path, c.target), err: err}
	}
	if len(b) > maxBody {
		return fmt.Errorf("faas: %s %s: answer larger than %d bytes", method, path, maxBody)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("faas: %s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

// Slots returns every slot of the host.
func (c *Client) Slots(ctx context.Context) ([]agentapi.Slot, error) {
	var l agentapi.SlotList
	if err := c.call(ctx, http.MethodGet, "/v1/slots", nil, &l); err != nil {
		return nil, err
	}
	return l.Slots, nil
}

// Slot returns slot n, with its sensors.
func (c *Client) Slot(ctx context.Context, n int) (agentapi.Slot, error) {
	var s agentapi.Slot
	err := c.call(ctx, http.MethodGet, "/v1/slots/"+strconv.Itoa(n), nil, &s)
	return s, err
}

// Clear clears slot n (one the caller holds, or any as operator) and returns
// its new state.
func (c *Client) Clear(ctx context.Context, n int) (agentapi.Slot, error) {
	var s agentapi.Slot
	err := c.call(ctx, http.MethodPost, "/v1/slots/"+strconv.Itoa(n)+"/clear", nil, &s)
	return s, err
}

// Images returns the node cache.
func (c *Client) Images(ctx context.Context) (agentapi.ImageList, error) {
	var l agentapi.ImageList
	err := c.call(ctx, http.MethodGet, "/v1/images", nil, &l)
	return l, err
}

var errNoID = errors.New("faas: faasd answered a load without an id")
