package registryclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
)

// MaxWait is the longest a long poll (Attachment, Assignments) waits on
// the registry.
const MaxWait = 30 * time.Second

func attachmentPath(id string) string { return "/attachments/" + url.PathEscape(id) }

// Attach asks the accelerator pool for a slot running the request's image
// (a tenant's call); ErrConflict when no node has room.
func (c *Client) Attach(ctx context.Context, in poolapi.AttachRequest) (poolapi.Attachment, error) {
	var a poolapi.Attachment
	return a, c.Do(ctx, http.MethodPost, "/attachments", in, &a)
}

// Attachments lists the caller's attachments (live, and ended within a
// day); all asks for every tenant's (an admin's call).
func (c *Client) Attachments(ctx context.Context, all bool) ([]poolapi.Attachment, error) {
	path := "/attachments"
	if all {
		path += "?all=true"
	}
	var l poolapi.AttachmentList
	return l.Attachments, c.Do(ctx, http.MethodGet, path, nil, &l)
}

// Attachment returns attachment id once its state differs from since, or
// after wait (at most MaxWait); since "" and wait 0 answer at once.
func (c *Client) Attachment(ctx context.Context, id string, since poolapi.State, wait time.Duration) (poolapi.Attachment, error) {
	path := attachmentPath(id)
	if wait > 0 {
		path += fmt.Sprintf("?wait=%dms&since=%s", min(wait, MaxWait).Milliseconds(), url.QueryEscape(string(since)))
	}
	var a poolapi.Attachment
	return a, c.Do(ctx, http.MethodGet, path, nil, &a)
}

// Renew extends an attachment's lease; ErrGone when it ended.
func (c *Client) Renew(ctx context.Context, id string) (poolapi.Attachment, error) {
	var a poolapi.Attachment
	return a, c.Do(ctx, http.MethodPost, attachmentPath(id)+"/renew", nil, &a)
}

// Detach ends an attachment.
func (c *Client) Detach(ctx context.Context, id string) (poolapi.Attachment, error) {
	var a poolapi.Attachment
	return a, c.Do(ctx, http.MethodDelete, attachmentPath(id), nil, &a)
}

// Assignments returns, as a node, the node's desired state in the pool
// once its revision passes since, or after wait (at most MaxWait) with the
// same revision.
func (c *Client) Assignments(ctx context.Context, node string, since int64, wait time.Duration) (poolapi.Assignments, error) {
	var as poolapi.Assignments
	wait = min(max(wait, 0), MaxWait)
	path := fmt.Sprintf("%s/assignments?since=%d&wait=%dms", nodePath(node), since, wait.Milliseconds())
	return as, c.Do(ctx, http.MethodGet, path, nil, &as)
}

// AttachmentGrant asks, as a node, for a load grant of attachment aid's
// image for its tenant: the node loads for a tenant whose token it never
// holds.
func (c *Client) AttachmentGrant(ctx context.Context, node, aid string) (registryapi.Grant, error) {
	var g registryapi.Grant
	return g, c.Do(ctx, http.MethodPost, nodePath(node)+attachmentPath(aid)+"/grant", nil, &g)
}

// ReportAttachment reports, as a node, the state of attachment aid on it.
func (c *Client) ReportAttachment(ctx context.Context, node, aid string, r poolapi.StateReport) error {
	return c.Do(ctx, http.MethodPost, nodePath(node)+attachmentPath(aid)+"/state", r, nil)
}
