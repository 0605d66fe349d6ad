package registryclient

import (
	"context"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// CreateWebhook registers a webhook for the caller's account; its Secret
// is shown only in this answer.
func (c *Client) CreateWebhook(ctx context.Context, in registryapi.NewWebhook) (registryapi.Webhook, error) {
	var w registryapi.Webhook
	return w, c.Do(ctx, http.MethodPost, "/webhooks", in, &w)
}

// Webhooks lists a page of the caller's webhooks.
func (c *Client) Webhooks(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Webhook], error) {
	return List[registryapi.Webhook](ctx, c, "/webhooks", q)
}

// Webhook returns one of the caller's webhooks.
func (c *Client) Webhook(ctx context.Context, id string) (registryapi.Webhook, error) {
	var w registryapi.Webhook
	return w, c.Do(ctx, http.MethodGet, "/webhooks/"+url.PathEscape(id), nil, &w)
}

// UpdateWebhook changes one of the caller's webhooks.
func (c *Client) UpdateWebhook(ctx context.Context, id string, in registryapi.WebhookUpdate) (registryapi.Webhook, error) {
	var w registryapi.Webhook
	return w, c.Do(ctx, http.MethodPatch, "/webhooks/"+url.PathEscape(id), in, &w)
}

// DeleteWebhook deletes one of the caller's webhooks and its delivery log.
func (c *Client) DeleteWebhook(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodDelete, "/webhooks/"+url.PathEscape(id), nil, nil)
}

// WebhookDeliveries lists a page of a webhook's deliveries, newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, id string, q url.Values) (registryapi.Page[registryapi.WebhookDelivery], error) {
	return List[registryapi.WebhookDelivery](ctx, c, "/webhooks/"+url.PathEscape(id)+"/deliveries", q)
}

// Redeliver queues a delivery's event again, as a new delivery.
func (c *Client) Redeliver(ctx context.Context, webhookID, deliveryID string) (registryapi.WebhookDelivery, error) {
	var d registryapi.WebhookDelivery
	return d, c.Do(ctx, http.MethodPost, "/webhooks/"+url.PathEscape(webhookID)+"/deliveries/"+url.PathEscape(deliveryID)+"/redeliver", nil, &d)
}

// Notifications lists a page of the caller's notifications, newest
// first; q may hold "unread".
func (c *Client) Notifications(ctx context.Context, q url.Values) (registryapi.Page[registryapi.Notification], error) {
	return List[registryapi.Notification](ctx, c, "/notifications", q)
}

// MarkNotificationRead marks one of the caller's notifications read.
func (c *Client) MarkNotificationRead(ctx context.Context, id string) error {
	return c.Do(ctx, http.MethodPost, "/notifications/"+url.PathEscape(id)+"/read", nil, nil)
}
