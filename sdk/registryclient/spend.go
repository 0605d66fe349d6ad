package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// SpendLimits returns tenant's spend of the month running against its
// limits; the tenant itself and admins may ask.
func (c *Client) SpendLimits(ctx context.Context, tenant string) (registryapi.SpendLimits, error) {
	var out registryapi.SpendLimits
	return out, c.Do(ctx, http.MethodGet, "/accounts/"+url.PathEscape(tenant)+"/spend-limits", nil, &out)
}

// SetSpendLimit sets tenant's alert threshold and hard limit in currency
// (both nil: removes them) and returns the currency's spend against them.
func (c *Client) SetSpendLimit(ctx context.Context, tenant, currency string, in registryapi.SpendLimitUpdate) (registryapi.SpendLimit, error) {
	var out registryapi.SpendLimit
	return out, c.Do(ctx, http.MethodPut, "/accounts/"+url.PathEscape(tenant)+"/spend-limits/"+url.PathEscape(currency), in, &out)
}
