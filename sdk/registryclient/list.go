package registryclient

import (
	"context"
	"fmt"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// maxPages bounds ListAll: 2,000 pages of MaxLimit items is far beyond any
// list of the API, and a registry answering cursors forever ends there.
const maxPages = 2000

// List fetches one page of the list at path with query q (filters, and
// "limit" and "cursor"; nil for none).
func List[T any](ctx context.Context, c *Client, path string, q url.Values) (registryapi.Page[T], error) {
	var p registryapi.Page[T]
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	err := c.Do(ctx, "GET", path, nil, &p)
	return p, err
}

// ListAll fetches every page of the list at path with query q, in the
// API's order.
func ListAll[T any](ctx context.Context, c *Client, path string, q url.Values) ([]T, error) {
	q2 := url.Values{}
	for k, v := range q {
		q2[k] = v
	}
	if q2.Get("limit") == "" {
		q2.Set("limit", fmt.Sprint(registryapi.MaxLimit))
	}
	var all []T
	for range maxPages {
		p, err := List[T](ctx, c, path, q2)
		if err != nil {
			return all, err
		}
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			return all, nil
		}
		if p.NextCursor == q2.Get("cursor") {
			return all, &Error{Method: "GET", Path: registryapi.Prefix + path, Message: "the registry answered the same cursor twice"}
		}
		q2.Set("cursor", p.NextCursor)
	}
	return all, &Error{Method: "GET", Path: registryapi.Prefix + path, Message: fmt.Sprintf("list longer than %d pages", maxPages)}
}
