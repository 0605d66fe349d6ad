package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// webhookSecretPrefix marks webhook secrets, as faas_ marks API tokens, so
// that a leaked one is recognisable.
const webhookSecretPrefix = "whsec_"

// emit writes an event of account in tx, the transaction of what caused
// it; a trigger fans it out to the account's webhooks (package webhooks).
func emit(ctx context.Context, tx pgx.Tx, accountID, typ string, data map[string]any) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("api: event data: %w", err)
	}
	_, err = tx.Exec(ctx, `insert into events (account_id, type, data) values ($1::uuid, $2, $3)`, accountID, typ, b)
	return err
}

const webhookSel = `select id::text, url, description, events, active, created_at, updated_at from webhooks `

func scanWebhook(r pgx.Row) (registryapi.Webhook, error) {
	var w registryapi.Webhook
	return w, r.Scan(&w.ID, &w.URL, &w.Description, &w.Events, &w.Active, &w.CreatedAt, &w.UpdatedAt)
}

func (s *store) createWebhook(ctx context.Context, p *principal, in registryapi.NewWebhook) (registryapi.Webhook, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return registryapi.Webhook{}, fmt.Errorf("api: webhook secret: %w", err)
	}
	secret := webhookSecretPrefix + base64.RawURLEncoding.EncodeToString(raw)
	var w registryapi.Webhook
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		// The account's row is locked so that concurrent creations count
		// each other against the limit.
		var n int
		err := tx.QueryRow(ctx, `select (select count(*) from webhooks where account_id = a.id)
			from accounts a where a.id = $1::uuid for update`, p.ID).Scan(&n)
		if err != nil {
			return auditEntry{}, err
		}
		if n >= registryapi.MaxWebhooksPerAccount {
			return auditEntry{}, fmt.Errorf("%w: at most %d webhooks per account", ErrConflict, registryapi.MaxWebhooksPerAccount)
		}
		w, err = scanWebhook(tx.QueryRow(ctx, `insert into webhooks (account_id, url, description, secret, events)
			values ($1::uuid, $2, $3, $4, $5) returning id::text, url, description, events, active, created_at, updated_at`,
			p.ID, in.URL, in.Description, secret, in.Events))
		return auditEntry{"webhook.create", "webhook", w.ID, map[string]any{"events": in.Events}}, err
	})
	w.Secret = secret
	return w, err
}

func (s *store) listWebhooks(ctx context.Context, accountID string, pg pageReq) ([]registryapi.Webhook, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, webhookSel+`where account_id = $1::uuid and (created_at, id) > ($2, $3::uuid)
		order by created_at, id limit $4`, accountID, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Webhook, error) { return scanWebhook(r) })
}

// getWebhook answers another account's webhook as not found.
func (s *store) getWebhook(ctx context.Context, accountID, id string) (registryapi.Webhook, error) {
	w, err := scanWebhook(s.db.QueryRow(ctx, webhookSel+`where id = $1::uuid and account_id = $2::uuid`, id, accountID))
	return w, noRows(err, "no such webhook of yours")
}

func (s *store) updateWebhook(ctx context.Context, p *principal, id string, in registryapi.WebhookUpdate) (registryapi.Webhook, error) {
	var w registryapi.Webhook
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		w, err = scanWebhook(tx.QueryRow(ctx, `update webhooks set url = coalesce($3, url),
			description = coalesce($4, description), events = coalesce($5, events), active = coalesce($6, active),
			updated_at = now() where id = $1::uuid and account_id = $2::uuid
			returning id::text, url, description, events, active, created_at, updated_at`,
			id, p.ID, in.URL, in.Description, in.Events, in.Active))
		return auditEntry{"webhook.update", "webhook", id, map[string]any{"events": w.Events, "active": w.Active}}, noRows(err, "no such webhook of yours")
	})
	return w, err
}

func (s *store) deleteWebhook(ctx context.Context, p *principal, id string) error {
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var got string
		err := tx.QueryRow(ctx, `delete from webhooks where id = $1::uuid and account_id = $2::uuid returning id::text`,
			id, p.ID).Scan(&got)
		return auditEntry{"webhook.delete", "webhook", id, nil}, noRows(err, "no such webhook of yours")
	})
}

const deliverySel = `select d.id::text, d.webhook_id::text, d.event_id::text, e.type, coalesce(d.redelivery_of::text, ''),
	d.state, d.attempts, case when d.state in ('pending', 'delivering') then d.next_attempt_at end,
	coalesce(d.status_code, 0), coalesce(d.duration_ms, 0), d.error, d.created_at, d.updated_at
	from webhook_deliveries d join events e on e.id = d.event_id `

func scanDelivery(r pgx.Row) (registryapi.WebhookDelivery, error) {
	var d registryapi.WebhookDelivery
	return d, r.Scan(&d.ID, &d.WebhookID, &d.EventID, &d.EventType, &d.RedeliveryOf, &d.State, &d.Attempts,
		&d.NextAttemptAt, &d.StatusCode, &d.DurationMS, &d.Error, &d.CreatedAt, &d.UpdatedAt)
}

// listDeliveries lists a webhook's deliveries, newest first.
func (s *store) listDeliveries(ctx context.Context, accountID, webhookID string, pg pageReq) ([]registryapi.WebhookDelivery, error) {
	if _, err := s.getWebhook(ctx, accountID, webhookID); err != nil {
		return nil, err
	}
	t, id := before(pg)
	rows, err := s.db.Query(ctx, deliverySel+`where d.webhook_id = $1::uuid and (d.created_at, d.id) < ($2, $3::uuid)
		order by d.created_at desc, d.id desc limit $4`, webhookID, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.WebhookDelivery, error) { return scanDelivery(r) })
}

// redeliver queues the event of one of the webhook's deliveries again, as
// a new delivery; one already queued for that event and webhook is a
// conflict, so that a button pressed twice sends once.
func (s *store) redeliver(ctx context.Context, p *principal, webhookID, deliveryID string) (registryapi.WebhookDelivery, error) {
	var d registryapi.WebhookDelivery
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var eventID string
		var queued bool
		err := tx.QueryRow(ctx, `select d.event_id::text, exists (select 1 from webhook_deliveries q
				where q.webhook_id = d.webhook_id and q.event_id = d.event_id and q.state in ('pending', 'delivering'))
			from webhook_deliveries d join webhooks w on w.id = d.webhook_id
			where d.id = $1::uuid and w.id = $2::uuid and w.account_id = $3::uuid for update of w`,
			deliveryID, webhookID, p.ID).Scan(&eventID, &queued)
		if err != nil {
			return auditEntry{}, noRows(err, "no such delivery of yours")
		}
		if queued {
			return auditEntry{}, fmt.Errorf("%w: a delivery of this event is already queued", ErrConflict)
		}
		var newID string
		err = tx.QueryRow(ctx, `insert into webhook_deliveries (webhook_id, event_id, redelivery_of)
			values ($1::uuid, $2::uuid, $3::uuid) returning id::text`, webhookID, eventID, deliveryID).Scan(&newID)
		if err != nil {
			return auditEntry{}, err
		}
		d, err = scanDelivery(tx.QueryRow(ctx, deliverySel+`where d.id = $1::uuid`, newID))
		return auditEntry{"webhook.redeliver", "webhook", webhookID, map[string]any{"delivery": deliveryID, "event": eventID}}, err
	})
	return d, err
}

// listNotifications lists the account's events, newest first.
func (s *store) listNotifications(ctx context.Context, accountID string, unread bool, pg pageReq) ([]registryapi.Notification, error) {
	t, id := before(pg)
	rows, err := s.db.Query(ctx, `select id::text, type, data, created_at, read_at from events
		where account_id = $1::uuid and (not $2 or read_at is null) and (created_at, id) < ($3, $4::uuid)
		order by created_at desc, id desc limit $5`, accountID, unread, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Notification, error) {
		var n registryapi.Notification
		return n, r.Scan(&n.ID, &n.Type, &n.Data, &n.CreatedAt, &n.ReadAt)
	})
}

func (s *store) markRead(ctx context.Context, p *principal, id string) error {
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var got string
		err := tx.QueryRow(ctx, `update events set read_at = coalesce(read_at, now())
			where id = $1::uuid and account_id = $2::uuid returning id::text`, id, p.ID).Scan(&got)
		return auditEntry{"notification.read", "event", id, nil}, noRows(err, "no such notification of yours")
	})
}

// before returns the keyset start of a page listed newest first (the
// maximum when none).
func before(pg pageReq) (time.Time, string) {
	if pg.after == nil {
		return time.Now().AddDate(100, 0, 0), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	}
	return pg.after.T, pg.after.ID
}
