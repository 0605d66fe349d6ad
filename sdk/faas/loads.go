package faas

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// LoadOption configures Load.
type LoadOption func(*loadOptions)

type loadOptions struct {
	slot     *int
	progress func(agentapi.Event)
}

// OnSlot loads into slot n: for a two-chip image, the board holding slot n.
// Without it faasd picks the lowest cleared slot that fits.
func OnSlot(n int) LoadOption { return func(o *loadOptions) { o.slot = &n } }

// WithProgress calls fn with every event of the load, in order, the final
// one (Event.Load set) included. fn runs on the caller's goroutine.
func WithProgress(fn func(agentapi.Event)) LoadOption {
	return func(o *loadOptions) { o.progress = fn }
}

// StartLoad starts a load (POST /v1/loads) and returns it running; follow
// it with Events or GetLoad.
func (c *Client) StartLoad(ctx context.Context, req agentapi.LoadRequest) (agentapi.Load, error) {
	var l agentapi.Load
	if err := c.call(ctx, http.MethodPost, "/v1/loads", req, &l); err != nil {
		return l, err
	}
	if l.ID == "" {
		return l, errNoID
	}
	return l, nil
}

// Load loads image and follows the load to its end. It returns the final
// load; when the load failed, also an *Error built from Load.Error.
func (c *Client) Load(ctx context.Context, image string, opts ...LoadOption) (agentapi.Load, error) {
	var o loadOptions
	for _, f := range opts {
		f(&o)
	}
	l, err := c.StartLoad(ctx, agentapi.LoadRequest{Image: image, Slot: o.slot})
	if err != nil {
		return l, err
	}
	return c.follow(ctx, l.ID, o.progress)
}

// Pull prefetches image into the node cache (POST /v1/pulls) and follows
// the pull to its end, calling progress (which may be nil) with every event.
// It returns the final pull; when it failed, also an *Error.
func (c *Client) Pull(ctx context.Context, image string, progress func(agentapi.Event)) (agentapi.Load, error) {
	var l agentapi.Load
	if err := c.call(ctx, http.MethodPost, "/v1/pulls", agentapi.PullRequest{Image: image}, &l); err != nil {
		return l, err
	}
	if l.ID == "" {
		return l, errNoID
	}
	return c.follow(ctx, l.ID, progress)
}

func (c *Client) follow(ctx context.Context, id string, progress func(agentapi.Event)) (agentapi.Load, error) {
	l, err := c.Events(ctx, id, func(ev agentapi.Event) error {
		if progress != nil {
			progress(ev)
		}
		return nil
	})
	if err != nil {
		return l, err
	}
	return l, loadError(l)
}

// GetLoad returns the state of load (or pull) id.
func (c *Client) GetLoad(ctx context.Context, id string) (agentapi.Load, error) {
	var l agentapi.Load
	err := c.call(ctx, http.MethodGet, "/v1/loads/"+url.PathEscape(id), nil, &l)
	return l, err
}

// Events reads the event stream of load id from its start, calling fn with
// each event in order (the final one included), and returns the final load.
// It does not turn a failed load into an error: look at Load.State. An
// error from fn stops the reading and is returned. A stream that ends
// before the final load is an error wrapping ErrUnavailable.
func (c *Client) Events(ctx context.Context, id string, fn func(agentapi.Event) error) (agentapi.Load, error) {
	path := "/v1/loads/" + url.PathEscape(id) + "/events"
	resp, err := c.send(ctx, http.MethodGet, path, nil, "application/x-ndjson")
	if err != nil {
		return agentapi.Load{}, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev agentapi.Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return agentapi.Load{}, fmt.Errorf("faas: load %s: bad event %.100q: %w", id, line, err)
		}
		if fn != nil {
			if err := fn(ev); err != nil {
				return agentapi.Load{}, err
			}
		}
		if ev.Load != nil {
			return *ev.Load, nil
		}
	}
	if ctx.Err() != nil {
		return agentapi.Load{}, ctx.Err()
	}
	err = sc.Err()
	if err == bufio.ErrTooLong {
		return agentapi.Load{}, fmt.Errorf("faas: load %s: event line longer than %d bytes", id, maxEventLine)
	}
	return agentapi.Load{}, &transportError{
		msg: fmt.Sprintf("load %s: the event stream of faasd at %s ended before the load finished", id, c.target), err: err,
		hnt: "faasd may have restarted, or the connection dropped; the load may still be running on the node"}
}
