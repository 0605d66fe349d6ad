package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Invoices returns the invoices of a month the caller may see; q may hold
// "month" (YYYY-MM, default the month running) and, for an admin,
// "tenant_id".
func (c *Client) Invoices(ctx context.Context, q url.Values) ([]registryapi.Invoice, error) {
	var l registryapi.Items[registryapi.Invoice]
	return l.Items, c.Do(ctx, http.MethodGet, "/invoices"+query(q), nil, &l)
}

// RevenueStatements returns the revenue statements of a month the caller
// may see; q may hold "month" and, for an admin, "isv_id".
func (c *Client) RevenueStatements(ctx context.Context, q url.Values) ([]registryapi.RevenueStatement, error) {
	var l registryapi.Items[registryapi.RevenueStatement]
	return l.Items, c.Do(ctx, http.MethodGet, "/revenue-statements"+query(q), nil, &l)
}

// StatementsCSV returns invoices ("/invoices") or revenue statements
// ("/revenue-statements") as CSV, one row per line and rows closing each
// document (its total; gross, fee and net); q as for Invoices and
// RevenueStatements.
func (c *Client) StatementsCSV(ctx context.Context, path string, q url.Values) ([]byte, error) {
	v := url.Values{}
	for k, vs := range q {
		v[k] = vs
	}
	v.Set("format", "csv")
	var b []byte
	return b, c.Do(ctx, http.MethodGet, path+query(v), nil, &b)
}

// CloseMonth closes a month (YYYY-MM) that has ended, as an admin: its
// statements are stored for good.
func (c *Client) CloseMonth(ctx context.Context, month string) (registryapi.MonthClosed, error) {
	var m registryapi.MonthClosed
	return m, c.Do(ctx, http.MethodPost, "/months/"+url.PathEscape(month)+"/close", nil, &m)
}

// query is q as a path's query ("" when empty).
func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
