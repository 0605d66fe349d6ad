package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

func nodePath(id string) string { return "/nodes/" + url.PathEscape(id) }

// RegisterNode registers the calling node account's node.
func (c *Client) RegisterNode(ctx context.Context, in registryapi.NodeRegistration) (registryapi.Node, error) {
	var n registryapi.Node
	return n, c.Do(ctx, http.MethodPost, "/nodes", in, &n)
}

// Heartbeat reports a node's boards and slots (and where it serves remote
// attach).
func (c *Client) Heartbeat(ctx context.Context, node string, in registryapi.Heartbeat) error {
	return c.Do(ctx, http.MethodPost, nodePath(node)+"/heartbeat", in, nil)
}

// Nodes lists a page of the registered nodes (an admin's call).
func (c *Client) Nodes(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Node], error) {
	return List[registryapi.Node](ctx, c, "/nodes", q)
}

// SetNodeTrust approves a node (approve) or revokes it.
func (c *Client) SetNodeTrust(ctx context.Context, node string, approve bool) (registryapi.Node, error) {
	op := "/approve"
	if !approve {
		op = "/revoke"
	}
	var n registryapi.Node
	return n, c.Do(ctx, http.MethodPost, nodePath(node)+op, nil, &n)
}

// RepinNode forgets a node's pinned TLS certificate, so that its next
// heartbeat pins a new one.
func (c *Client) RepinNode(ctx context.Context, node string) (registryapi.Node, error) {
	var n registryapi.Node
	return n, c.Do(ctx, http.MethodPost, nodePath(node)+"/repin", nil, &n)
}

// CreateEnrollment makes a one-time token with which a node enrolls
// approved.
func (c *Client) CreateEnrollment(ctx context.Context, in registryapi.NewEnrollment) (registryapi.Enrollment, error) {
	var e registryapi.Enrollment
	return e, c.Do(ctx, http.MethodPost, "/node-enrollments", in, &e)
}

// ReportUsage sends a node's usage records; the registry skips report ids
// it has.
func (c *Client) ReportUsage(ctx context.Context, in registryapi.UsageReport) (registryapi.UsageAccepted, error) {
	var a registryapi.UsageAccepted
	return a, c.Do(ctx, http.MethodPost, "/usage", in, &a)
}
