package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Prices ---------------------------------------------------------------------------
//
// A listing's prices are the rows of listing_prices (migrations/011_prices.sql),
// each in force from its effective_at until the next; the listing's price
// fields are the row in force now. The database refuses to change or
// delete a row in force, or to write one effective in the past, so what was
// billed stays billable at the same price.

// currentPrices joins, as cp, the prices in force now of listing l; a
// listing always has a row from its creation.
const currentPrices = ` left join lateral (select per_load_micros, per_hour_micros, per_attached_hour_micros
	from listing_prices p where p.listing_id = l.id and p.effective_at <= now()
	order by p.effective_at desc limit 1) cp on true `

const priceCols = `effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros, created_at`

func scanPrice(r pgx.Row) (registryapi.Price, error) {
	var p registryapi.Price
	return p, r.Scan(&p.EffectiveAt, &p.PerLoadMicros, &p.PerHourMicros, &p.PerAttachedHourMicros, &p.CreatedAt)
}

// setPrice writes listing id's prices effective at np.EffectiveAt (nil:
// the transaction's now), taking nil prices from the row that would be in
// force then. With onlyChanged, prices equal to those it would replace
// write nothing, so that saving a listing unchanged does
// not grow its history. The caller has locked the listing (ownListing).
func setPrice(ctx context.Context, tx pgx.Tx, p *principal, id string, np registryapi.NewPrice, onlyChanged bool) (registryapi.Price, error) {
	var at time.Time
	var past bool
	if err := tx.QueryRow(ctx, `select coalesce($1::timestamptz, now()), coalesce($1::timestamptz, now()) < now()`,
		np.EffectiveAt).Scan(&at, &past); err != nil {
		return registryapi.Price{}, err
	}
	if past {
		return registryapi.Price{}, fieldErr("effective_at", "is in the past: a price takes effect now or later, never backwards")
	}
	base, err := scanPrice(tx.QueryRow(ctx, `select `+priceCols+` from listing_prices where listing_id = $1::uuid and effective_at <= $2
		order by effective_at desc limit 1`, id, at))
	found := err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return registryapi.Price{}, err
	}
	next := registryapi.Price{EffectiveAt: at, PerLoadMicros: orInt(np.PerLoadMicros, base.PerLoadMicros),
		PerHourMicros: orInt(np.PerHourMicros, base.PerHourMicros), PerAttachedHourMicros: orInt(np.PerAttachedHourMicros, base.PerAttachedHourMicros)}
	if onlyChanged && found && next.PerLoadMicros == base.PerLoadMicros && next.PerHourMicros == base.PerHourMicros &&
		next.PerAttachedHourMicros == base.PerAttachedHourMicros {
		return base, nil
	}
	out, err := scanPrice(tx.QueryRow(ctx, `insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros,
		per_attached_hour_micros, created_by) values ($1::uuid, $2, $3, $4, $5, nullif($6, '')::uuid)
		on conflict (listing_id, effective_at) do update set per_load_micros = excluded.per_load_micros,
		per_hour_micros = excluded.per_hour_micros, per_attached_hour_micros = excluded.per_attached_hour_micros,
		created_at = now(), created_by = excluded.created_by
		returning `+priceCols, id, at, next.PerLoadMicros, next.PerHourMicros, next.PerAttachedHourMicros, p.ID))
	return out, err
}

func orInt(v *int64, def int64) int64 {
	if v == nil {
		return def
	}
	return *v
}

// schedulePrice is POST /listings/{id}/prices: the owner (or an admin)
// sets prices from now or from a later time.
func (s *store) schedulePrice(ctx context.Context, p *principal, id string, np registryapi.NewPrice) (registryapi.Price, error) {
	var out registryapi.Price
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		var err error
		out, err = setPrice(ctx, tx, p, id, np, false)
		if err != nil {
			return auditEntry{}, err
		}
		return auditEntry{"listing.price", "listing", id, map[string]any{"effective_at": out.EffectiveAt,
			"per_load_micros": out.PerLoadMicros, "per_hour_micros": out.PerHourMicros,
			"per_attached_hour_micros": out.PerAttachedHourMicros}}, nil
	})
	return out, err
}

// listPrices is a visible listing's whole price history with the prices
// scheduled for later, oldest first; a listing changes its prices rarely
// enough that the list is not paged.
func (s *store) listPrices(ctx context.Context, p *principal, id string) ([]registryapi.Price, error) {
	if _, err := s.getListing(ctx, s.db, p, id); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `select `+priceCols+` from listing_prices where listing_id = $1::uuid order by effective_at`, id)
	if err != nil {
		return nil, fmt.Errorf("api: prices: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Price, error) { return scanPrice(r) })
}

// trialFixed refuses a change of a listing's free trial once it has usage:
// the trial prices all of a tenant's usage of the listing, so changing it
// would rewrite what closed months billed.
func trialFixed(ctx context.Context, tx pgx.Tx, id string, hours *int) error {
	if hours == nil {
		return nil
	}
	var used bool
	if err := tx.QueryRow(ctx, `select exists (select 1 from listings l where l.id = $1::uuid and l.trial_hours <> $2)
		and exists (select 1 from usage_records where listing_id = $1::uuid)`, id, *hours).Scan(&used); err != nil {
		return err
	}
	if used {
		return fieldErr("trial_hours", "cannot change: the listing has usage, and the trial prices all of it")
	}
	return nil
}

// currencyFixed refuses a change of currency of a listing with usage: its
// price history is in the old currency, and so are its bills.
func currencyFixed(ctx context.Context, tx pgx.Tx, id string, cur *string) error {
	if cur == nil {
		return nil
	}
	var used bool
	if err := tx.QueryRow(ctx, `select exists (select 1 from listings l where l.id = $1::uuid and l.currency <> $2)
		and exists (select 1 from usage_records where listing_id = $1::uuid)`, id, *cur).Scan(&used); err != nil {
		return err
	}
	if used {
		return fieldErr("currency", "cannot change: the listing has usage priced in its currency")
	}
	return nil
}
