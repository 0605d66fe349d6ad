package webhooks

import (
	"context"
	"fmt"
)

// Scan writes a token.expiring event for each unrevoked API token that
// expires within Config.ExpiryNotice, once per token whichever replica
// scans (the event's dedupe key), and deletes events older than
// Config.Retention, their deliveries with them.
func (w *Worker) Scan(ctx context.Context) error {
	_, err := w.cfg.Pool.Exec(ctx, `insert into events (account_id, type, data, dedupe_key)
		select t.account_id, 'token.expiring',
			jsonb_build_object('token_id', t.id, 'name', t.name, 'expires_at', t.expires_at),
			'token.expiring:' || t.id::text
		from api_tokens t
		where t.revoked_at is null and t.expires_at > now() and t.expires_at <= now() + make_interval(secs => $1)
		on conflict (dedupe_key) do nothing`, w.cfg.ExpiryNotice.Seconds())
	if err != nil {
		return fmt.Errorf("webhooks: scanning tokens: %w", err)
	}
	_, err = w.cfg.Pool.Exec(ctx, `delete from events where created_at < now() - make_interval(secs => $1)`,
		w.cfg.Retention.Seconds())
	if err != nil {
		return fmt.Errorf("webhooks: deleting old events: %w", err)
	}
	return nil
}
