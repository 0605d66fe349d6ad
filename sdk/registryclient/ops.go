package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// UsageSummary returns the caller's usage with its cost; q may hold
// "listing_id", "from", "to" and "by" ("day").
func (c *Client) UsageSummary(ctx context.Context, q url.Values) (registryapi.UsageSummaries, error) {
	var s registryapi.UsageSummaries
	return s, c.Do(ctx, http.MethodGet, "/usage/summary"+query(q), nil, &s)
}

// Audit lists a page of the audit log the caller may see; q may hold
// "action", "target_type", "target_id" and "actor".
func (c *Client) Audit(ctx context.Context, q url.Values) (registryapi.Page[registryapi.AuditEntry], error) {
	return List[registryapi.AuditEntry](ctx, c, "/audit", q)
}

// ValidationJobs lists a page of the validation queue, newest first; q
// may hold "state" (an admin's call).
func (c *Client) ValidationJobs(ctx context.Context, q url.Values) (registryapi.Page[registryapi.ValidationJob], error) {
	return List[registryapi.ValidationJob](ctx, c, "/validation-jobs", q)
}

// Loads lists the slots running images the caller loaded.
func (c *Client) Loads(ctx context.Context) ([]registryapi.Load, error) {
	var l registryapi.Items[registryapi.Load]
	return l.Items, c.Do(ctx, http.MethodGet, "/loads", nil, &l)
}
