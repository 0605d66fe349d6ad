package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
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

// as is the registry's API as one of the demo's accounts.
func (r *registry) as(user string) (*registryclient.Client, error) {
	return registryclient.New(r.url, registryclient.WithBasicAuth(user, Password),
		registryclient.WithHTTPClient(httpClient), registryclient.WithUserAgent("faas-demo"))
}

// list creates acme's public listing of image with version 1.0.0 at
// digest, publishes it and returns its id.
func (r *registry) list(ctx context.Context, image, digest string) (string, error) {
	acme, err := r.as("acme")
	if err != nil {
		return "", err
	}
	name, vis := image, "public"
	l, err := acme.CreateListing(ctx, registryapi.NewListing{Repository: "acme/" + image,
		ListingFields: registryapi.ListingFields{Name: &name, Visibility: &vis}})
	if err != nil {
		return "", err
	}
	if _, err := acme.AddVersion(ctx, l.ID, registryapi.NewVersion{Version: "1.0.0", Digest: digest}); err != nil {
		return "", err
	}
	if _, err := acme.Publish(ctx, l.ID, true); err != nil {
		return "", err
	}
	return l.ID, nil
}

// available reports whether the listing's version passed validation; a
// version that failed it is an error.
func (r *registry) available(ctx context.Context, listing string) (bool, error) {
	acme, err := r.as("acme")
	if err != nil {
		return false, err
	}
	vs, err := acme.Versions(ctx, listing, nil)
	if err != nil {
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
