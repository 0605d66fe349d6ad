package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Me returns the caller's account.
func (c *Client) Me(ctx context.Context) (registryapi.Account, error) {
	var a registryapi.Account
	return a, c.Do(ctx, http.MethodGet, "/me", nil, &a)
}

// CreateAccount creates an account (an admin's call).
func (c *Client) CreateAccount(ctx context.Context, in registryapi.NewAccount) (registryapi.Account, error) {
	var a registryapi.Account
	return a, c.Do(ctx, http.MethodPost, "/accounts", in, &a)
}

// UpdateAccount changes an account's role or disabled flag (an admin's
// call).
func (c *Client) UpdateAccount(ctx context.Context, id string, in registryapi.AccountUpdate) (registryapi.Account, error) {
	var a registryapi.Account
	return a, c.Do(ctx, http.MethodPatch, "/accounts/"+url.PathEscape(id), in, &a)
}

// Accounts lists a page of accounts; q may hold "role".
func (c *Client) Accounts(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Account], error) {
	return List[registryapi.Account](ctx, c, "/accounts", q)
}

// CreateToken issues an API token for the caller; its Secret is shown
// only in this answer.
func (c *Client) CreateToken(ctx context.Context, in registryapi.NewToken) (registryapi.Token, error) {
	var t registryapi.Token
	return t, c.Do(ctx, http.MethodPost, "/tokens", in, &t)
}

// Tokens lists a page of the caller's API tokens.
func (c *Client) Tokens(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Token], error) {
	return List[registryapi.Token](ctx, c, "/tokens", q)
}

// RevokeToken revokes one of the caller's API tokens.
func (c *Client) RevokeToken(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/tokens/"+url.PathEscape(id), nil, nil)
}
