package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// registry calls the registry's REST API as the demo's accounts.
type registry struct{ url string }

var httpClient = &http.Client{Timeout: cmdTimeout}

func (r *registry) ready() (bool, error) {
	resp, err := httpClient.Get(r.url + "/readyz")
	if err != nil {
		return false, nil
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, nil
}

// call sends in as JSON to /api/v1 path as user and decodes the answer
// into out; a status other than want is an error.
func (r *registry) call(ctx context.Context, user, method, path string, in, out any, want int) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.url+"/api/v1"+path, body)
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, Password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s as %s: %w", method, path, user, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s as %s: %d %s", method, path, user, resp.StatusCode, bytes.TrimSpace(data))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: %w in %s", method, path, err, data)
		}
	}
	return nil
}

// list creates acme's public listing of image with version 1.0.0 at
// digest, publishes it and returns its id.
func (r *registry) list(ctx context.Context, image, digest string) (string, error) {
	var l struct{ ID string }
	if err := r.call(ctx, "acme", "POST", "/listings", map[string]any{"name": image, "repository": "acme/" + image, "visibility": "public"}, &l, 201); err != nil {
		return "", err
	}
	if err := r.call(ctx, "acme", "POST", "/listings/"+l.ID+"/versions", map[string]string{"version": "1.0.0", "digest": digest}, nil, 201); err != nil {
		return "", err
	}
	if err := r.call(ctx, "acme", "POST", "/listings/"+l.ID+"/publish", nil, nil, 200); err != nil {
		return "", err
	}
	return l.ID, nil
}

// available reports whether the listing's version passed validation; a
// version that failed it is an error.
func (r *registry) available(ctx context.Context, listing string) (bool, error) {
	var vs struct {
		Items []struct{ State, Digest string }
	}
	if err := r.call(ctx, "acme", "GET", "/listings/"+listing+"/versions", nil, &vs, 200); err != nil {
		return false, err
	}
	if len(vs.Items) != 1 {
		return false, fmt.Errorf("listing %s has %d versions, want 1", listing, len(vs.Items))
	}
	switch s := vs.Items[0].State; s {
	case "pending", "validating":
		return false, nil
	case "available":
		return true, nil
	default:
		return false, fmt.Errorf("validation of listing %s ended %q", listing, s)
	}
}

// healthy reports whether faasd answers GET /healthz on socket.
func healthy(socket string) bool {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}}}
	resp, err := c.Get("http://faasd/healthz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// portalListings counts the accelerators the portal's marketplace page
// shows an anonymous visitor.
func (r *registry) portalListings(ctx context.Context) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url+"/", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /: %s", resp.Status)
	}
	return strings.Count(string(b), `<li class="card">`), nil
}
