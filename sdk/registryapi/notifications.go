package registryapi

import (
	"encoding/json"
	"time"
)

// Event types: what notifications, and webhooks, are about.
const (
	// EventValidationFinished: a version pushed by the ISV was validated
	// (data: job_id, repository, digest, listing_id, state available or
	// failed, reasons: how many findings). To the ISV.
	EventValidationFinished = "validation.finished"
	// EventSubscriptionCreated: a tenant subscribed to one of the ISV's
	// listings (data: entitlement_id, listing_id, listing_name, tenant_id,
	// tenant). To the ISV.
	EventSubscriptionCreated = "subscription.created"
	// EventTokenExpiring: an API token expires within the registry's
	// notice, 7 days by default (data: token_id, name, expires_at). To its
	// owner, once per token.
	EventTokenExpiring = "token.expiring"
	// EventSpendThreshold: the tenant's spend of the month (UTC) in a
	// currency reached its alert threshold (data: tenant, currency, month,
	// spend_micros, alert_micros, limit_micros). To the tenant, once per
	// month and currency.
	EventSpendThreshold = "spend.threshold_reached"
)

// EventTypes lists every event type.
var EventTypes = []string{EventValidationFinished, EventSubscriptionCreated, EventTokenExpiring, EventSpendThreshold}

// Limits of webhooks.
const (
	MaxWebhooksPerAccount = 10
	MaxWebhookURLLength   = 2048
	MaxWebhookDescription = 256
)

// Webhook is an endpoint of an account that receives its events.
type Webhook struct {
	ID          string `json:"id"`
	URL         string `json:"url"`
	Description string `json:"description"`
	// Events are the event types delivered.
	Events []string `json:"events"`
	Active bool     `json:"active"`
	// Secret (whsec_…) signs deliveries; only in the answer that creates
	// the webhook.
	Secret    string    `json:"secret,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// NewWebhook is the body of POST /webhooks.
type NewWebhook struct {
	URL         string   `json:"url"`
	Description string   `json:"description,omitempty"`
	Events      []string `json:"events"`
}

// WebhookUpdate is the body of PATCH /webhooks/{id}; absent fields stay.
type WebhookUpdate struct {
	URL         *string  `json:"url,omitempty"`
	Description *string  `json:"description,omitempty"`
	Events      []string `json:"events,omitempty"`
	Active      *bool    `json:"active,omitempty"`
}

// WebhookDelivery is one event sent to one webhook, with its last
// attempt's outcome.
type WebhookDelivery struct {
	ID           string `json:"id"`
	WebhookID    string `json:"webhook_id"`
	EventID      string `json:"event_id"`
	EventType    string `json:"event_type"`
	RedeliveryOf string `json:"redelivery_of,omitempty"`
	// State is pending, delivering, succeeded or failed (attempts spent).
	State         string     `json:"state"`
	Attempts      int        `json:"attempts"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	StatusCode    int        `json:"status_code,omitempty"`
	DurationMS    int        `json:"duration_ms,omitempty"`
	Error         string     `json:"error,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	UpdatedAt     time.Time  `json:"updated_at"`
}

// Notification is an event of the caller's account, as the portal lists
// them.
type Notification struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	Data      json.RawMessage `json:"data"`
	CreatedAt time.Time       `json:"created_at"`
	ReadAt    *time.Time      `json:"read_at,omitempty"`
}
