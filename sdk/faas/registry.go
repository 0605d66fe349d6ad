package faas

// The registry's pool API as a tenant calls it (/api/v1/attachments).

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
)

// Attachments lists the tenant's attachments (live, and ended within a day).
func Attachments(ctx context.Context, registryURL string, opts ...AttachOption) ([]poolapi.Attachment, error) {
	reg, err := registryFor(registryURL, opts)
	if err != nil {
		return nil, err
	}
	var l poolapi.AttachmentList
	err = reg.do(ctx, http.MethodGet, "/attachments", nil, &l)
	return l.Attachments, err
}

// Detach detaches attachment id (one held by another process).
func Detach(ctx context.Context, registryURL, id string, opts ...AttachOption) (poolapi.Attachment, error) {
	var info poolapi.Attachment
	reg, err := registryFor(registryURL, opts)
	if err != nil {
		return info, err
	}
	err = reg.do(ctx, http.MethodDelete, "/attachments/"+url.PathEscape(id), nil, &info)
	return info, err
}

// registryFor is the pool API of the registry at registryURL for the
// tenant of opts (WithRegistryToken); either left out is StoredLogin's.
func registryFor(registryURL string, opts []AttachOption) (*registryAPI, error) {
	o := attachOptions{ua: defaultUA}
	for _, f := range opts {
		f(&o)
	}
	if o.token == "" || registryURL == "" {
		l, err := StoredLogin()
		if err != nil {
			return nil, err
		}
		o.token = cmp.Or(o.token, l.Token)
		registryURL = cmp.Or(registryURL, l.Registry)
	}
	if o.token == "" {
		return nil, &Error{Code: agentapi.CodeUnauthenticated, Message: "faas: the pool needs the tenant's registry token", Hint: "run `faas login` or set $FAAS_TOKEN"}
	}
	return newRegistryAPI(registryURL, o.token, o.hc, o.ua)
}

// registryAPI calls the registry's /api/v1 as a tenant.
type registryAPI struct {
	base  string
	token string
	hc    *http.Client
	ua    string
}

func newRegistryAPI(base, token string, hc *http.Client, ua string) (*registryAPI, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("faas: registry %q: want https://host:port", base),
			Hint: "run `faas login REGISTRY` or set $FAAS_REGISTRY"}
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("faas: registry %q: plain http is allowed only on the loopback interface", base)}
	}
	if hc == nil {
		hc = &http.Client{Timeout: 90 * time.Second} // above the longest long poll
	}
	return &registryAPI{base: strings.TrimSuffix(base, "/"), token: token, hc: hc, ua: ua}, nil
}

func (r *registryAPI) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	req.Header.Set("User-Agent", r.ua)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	op := method + " " + strings.SplitN(path, "?", 2)[0]
	resp, err := r.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &transportError{msg: "registry " + r.base + ": " + op, err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &transportError{msg: "registry " + r.base + ": " + op, err: err}
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(data, &e)
		msg := cmp.Or(e.Error.Message, http.StatusText(resp.StatusCode))
		switch resp.StatusCode {
		case http.StatusGone:
			return fmt.Errorf("%w: %s", ErrLeaseLost, msg)
		case http.StatusConflict:
			return fmt.Errorf("%w: %s", ErrNoCapacity, msg)
		case http.StatusUnauthorized:
			return &Error{Status: resp.StatusCode, Code: agentapi.CodeUnauthenticated, Message: "registry: " + msg, Hint: "run `faas login` again"}
		case http.StatusForbidden:
			code := agentapi.CodePermission
			if strings.Contains(msg, "entitled") {
				code = agentapi.CodeNotEntitled
			}
			return &Error{Status: resp.StatusCode, Code: code, Message: "registry: " + msg}
		case http.StatusNotFound:
			return &Error{Status: resp.StatusCode, Code: agentapi.CodeNotFound, Message: "registry: " + msg}
		case http.StatusBadRequest, http.StatusUnprocessableEntity:
			return &Error{Status: resp.StatusCode, Code: agentapi.CodeBadRequest, Message: "registry: " + msg}
		}
		return &Error{Status: resp.StatusCode, Code: agentapi.CodeUnavailable, Message: "registry: " + msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return &transportError{msg: "registry " + r.base + ": " + op + ": malformed answer", err: err}
	}
	return nil
}
