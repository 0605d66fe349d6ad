package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// TagRules lists the tag immutability rules of a listing's repository
// (the listing's owner, or an admin).
func (c *Client) TagRules(ctx context.Context, listing string) (registryapi.Items[registryapi.TagRule], error) {
	var rs registryapi.Items[registryapi.TagRule]
	return rs, c.Do(ctx, http.MethodGet, listingPath(listing)+"/tag-rules", nil, &rs)
}

// AddTagRule makes the tags of a listing's repository that match pattern
// immutable once set.
func (c *Client) AddTagRule(ctx context.Context, listing, pattern string) (registryapi.TagRule, error) {
	var r registryapi.TagRule
	return r, c.Do(ctx, http.MethodPost, listingPath(listing)+"/tag-rules", registryapi.NewTagRule{Pattern: pattern}, &r)
}

// DeleteTagRule removes a tag rule; tags that name listed versions stay
// immutable.
func (c *Client) DeleteTagRule(ctx context.Context, listing, rule string) error {
	return c.Do(ctx, http.MethodDelete, listingPath(listing)+"/tag-rules/"+url.PathEscape(rule), nil, nil)
}

// Tag returns the state of one tag of a listing's repository: the digest
// it names and whether it may still move.
func (c *Client) Tag(ctx context.Context, listing, tag string) (registryapi.Tag, error) {
	var t registryapi.Tag
	return t, c.Do(ctx, http.MethodGet, listingPath(listing)+"/tags/"+url.PathEscape(tag), nil, &t)
}
