package faas

// The registry's pool API as a tenant calls it (/api/v1/attachments).

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// Attachments lists the tenant's attachments (live, and ended within a day).
func Attachments(ctx context.Context, registryURL string, opts ...AttachOption) ([]poolapi.Attachment, error) {
	reg, err := registryFor(registryURL, opts)
	if err != nil {
		return nil, err
	}
	l, err := reg.Attachments(ctx, false)
	return l, registryErr(err)
}

// Detach detaches attachment id (one held by another process).
func Detach(ctx context.Context, registryURL, id string, opts ...AttachOption) (poolapi.Attachment, error) {
	reg, err := registryFor(registryURL, opts)
	if err != nil {
		return poolapi.Attachment{}, err
	}
	info, err := reg.Detach(ctx, id)
	return info, registryErr(err)
}

// registryFor is the pool API of the registry at registryURL for the
// tenant of opts (WithRegistryToken); either left out is StoredLogin's.
func registryFor(registryURL string, opts []AttachOption) (*registryclient.Client, error) {
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

// newRegistryAPI is the registry's client for a tenant's token: plain
// http only on the loopback interface, where no one else sees the token.
func newRegistryAPI(base, token string, hc *http.Client, ua string) (*registryclient.Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("faas: registry %q: want https://host:port", base),
			Hint: "run `faas login REGISTRY` or set $FAAS_REGISTRY"}
	}
	if u.Scheme == "http" && !isLoopback(u.Hostname()) {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("faas: registry %q: plain http is allowed only on the loopback interface", base)}
	}
	opts := []registryclient.Option{registryclient.WithToken(token), registryclient.WithUserAgent(ua)}
	if hc != nil {
		opts = append(opts, registryclient.WithHTTPClient(hc))
	}
	c, err := registryclient.New(base, opts...)
	if err != nil {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: "faas: " + err.Error()}
	}
	return c, nil
}

// registryErr is the SDK's error for a failed call of the registry: its
// sentinels (ErrLeaseLost, ErrNoCapacity) and codes, with a hint.
func registryErr(err error) error {
	var e *registryclient.Error
	if !errors.As(err, &e) {
		return err // ctx's error
	}
	if e.Status == 0 {
		return &transportError{msg: "registry: " + e.Method + " " + e.Path, err: e.Err}
	}
	msg := "registry: " + e.Message
	switch {
	case e.Status == http.StatusPaymentRequired:
		return &Error{Status: e.Status, Code: agentapi.CodeSpendLimit, Message: msg,
			Hint: "raise your spend limit (portal: Spend limit) or wait until the month ends; what runs is not stopped"}
	case e.Status == http.StatusGone:
		return fmt.Errorf("%w: %s", ErrLeaseLost, e.Message)
	case e.Status == http.StatusConflict:
		return fmt.Errorf("%w: %s", ErrNoCapacity, e.Message)
	case e.Status == http.StatusUnauthorized:
		return &Error{Status: e.Status, Code: agentapi.CodeUnauthenticated, Message: msg, Hint: "run `faas login` again"}
	case e.Status == http.StatusForbidden:
		code := agentapi.CodePermission
		if strings.Contains(e.Message, "entitled") {
			code = agentapi.CodeNotEntitled
		}
		return &Error{Status: e.Status, Code: code, Message: msg}
	case e.Status == http.StatusNotFound:
		return &Error{Status: e.Status, Code: agentapi.CodeNotFound, Message: msg}
	case errors.Is(e, registryclient.ErrInvalid):
		return &Error{Status: e.Status, Code: agentapi.CodeBadRequest, Message: msg}
	case e.Status < 300:
		return &transportError{msg: "registry: " + e.Method + " " + e.Path + ": " + e.Message, err: e.Err}
	}
	return &Error{Status: e.Status, Code: agentapi.CodeUnavailable, Message: msg}
}
