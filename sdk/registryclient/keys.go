package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// AddSigningKey registers a PEM public key of the calling ISV.
func (c *Client) AddSigningKey(ctx context.Context, publicKeyPEM string) (registryapi.SigningKey, error) {
	var k registryapi.SigningKey
	return k, c.Do(ctx, http.MethodPost, "/keys", registryapi.NewSigningKey{PublicKey: publicKeyPEM}, &k)
}

// SigningKeys lists a page of the caller's signing keys (an admin's:
// all).
func (c *Client) SigningKeys(ctx context.Context, q url.Values) (registryapi.Page[registryapi.SigningKey], error) {
	return List[registryapi.SigningKey](ctx, c, "/keys", q)
}

// RevokeSigningKey revokes a signing key; images it signed stop loading.
func (c *Client) RevokeSigningKey(ctx context.Context, id string) (registryapi.SigningKey, error) {
	var k registryapi.SigningKey
	return k, c.Do(ctx, http.MethodPost, "/keys/"+url.PathEscape(id)+"/revoke", nil, &k)
}

// RepositoryKeys returns the unrevoked signing keys of the ISV owning
// repo, with which a node checks an image before it loads it.
func (c *Client) RepositoryKeys(ctx context.Context, repo string) (registryapi.RepositoryKeys, error) {
	var rk registryapi.RepositoryKeys
	return rk, c.Do(ctx, http.MethodGet, "/signing-keys?repository="+url.QueryEscape(repo), nil, &rk)
}

// ReleaseKeys asks, as a node, for the data keys of a sealed image for a
// tenant, wrapped to the node's key; it spends the request's load grant.
func (c *Client) ReleaseKeys(ctx context.Context, in registryapi.KeyRelease) ([]registryapi.WrappedKey, error) {
	var r registryapi.KeyReleaseResult
	return r.WrappedKeys, c.Do(ctx, http.MethodPost, registryapi.KeyReleasePath, in, &r)
}

// LoadGrant asks for a grant that lets a node load an image for the
// caller, a tenant: the node presents it to ReleaseKeys and names it in
// its usage reports.
func (c *Client) LoadGrant(ctx context.Context, in registryapi.GrantRequest) (registryapi.Grant, error) {
	var g registryapi.Grant
	return g, c.Do(ctx, http.MethodPost, "/load-grants", in, &g)
}
