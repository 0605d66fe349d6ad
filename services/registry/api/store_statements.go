package api

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Statements --------------------------------------------------------------------------
//
// A month's lines are what its usage costs now (pricedUsage, per month
// window) less what closed months already billed for it, for every month
// from the first with usage to it. For the month itself nothing is billed
// before it closes, so its lines are its usage; for earlier months the
// difference is what arrived after they closed: the adjustment lines.
// Every record is thus billed exactly once, in whichever month's close
// first sees it, however late its node reported it.

// statementLines is a with item defining lines, of priced: a tenant's
// usage of a listing version in a unit per month; the free time of the
// listing's trial is its own trial_hour line, of amount 0. Each row of
// priced is read once (x doubles it for its trial line): a with item read
// twice is materialised whole, which costs the planner's estimate enough
// to have PostgreSQL JIT-compile the query, seconds on every statement.
const statementLines = `lines as (
	select u.month as for_month, u.tenant_id, u.listing_id, u.version, u.unit,
		sum(u.quantity) as quantity,
		case when u.unit = 'load' then sum(u.load_micros) else floor(sum(u.time_value) / ` + nsPerHour + `) end as amount
	from (select p.month, p.tenant_id, p.listing_id, v.version,
			case when x.trial then 0 else p.load_micros end as load_micros,
			case when x.trial then 0 else p.time_value end as time_value,
			case when x.trial then 'trial_hour' when p.event = 'load' then 'load' when p.event = 'busy' then 'loaded_hour'
				else 'attached_hour' end as unit,
			case when x.trial then p.ns_free when p.event = 'load' then 1 else p.ns_in - p.ns_free end as quantity
		from priced p, lateral (` + lineVersion + `) v, (values (false), (true)) x (trial)
		where p.event in ('load', 'busy', 'attach') and (not x.trial or p.ns_free > 0)) u
	group by 1, 2, 3, 4, 5)`

// lineVersion is the version a record of priced p is billed under: the
// listing's first version of its image, "" when none.
const lineVersion = `select coalesce((select v.version from listing_versions v where v.listing_id = p.listing_id
	and v.manifest_digest = p.manifest_digest order by v.created_at, v.version limit 1), '') as version`

// statementDiff is a with clause defining diff, the lines a close of $2
// would store: its usage, and adjustments for the months from $1, the
// first with usage, to $3. A close adjusts every month before it ($3 is
// $2); a preview of a month after one not closed yet leaves that month's
// usage to that month's close ($3 is the last month closed).
var statementDiff = pricedUsage(`windows as (select d::date as month,
		extract(epoch from d at time zone 'UTC') * 1000000000 as w0,
		extract(epoch from (d + interval '1 month') at time zone 'UTC') * 1000000000 as w1
	from generate_series($1::date::timestamp, $2::date::timestamp, interval '1 month') d
	where d <= $3::date::timestamp or d = $2::date::timestamp)`) + `,
` + statementLines + `,
billed as (
	select for_month, tenant_id, listing_id, version, unit, sum(quantity) as quantity, sum(amount_micros) as amount
	from statement_lines where for_month >= $1 group by 1, 2, 3, 4, 5),
diff as (
	select for_month, tenant_id, listing_id, l.owner_id as isv_id, l.currency, version, unit,
		(coalesce(n.quantity, 0) - coalesce(b.quantity, 0))::bigint as quantity,
		(coalesce(n.amount, 0) - coalesce(b.amount, 0))::bigint as amount
	from lines n full join billed b using (for_month, tenant_id, listing_id, version, unit)
	join listings l on l.id = listing_id
	where coalesce(n.quantity, 0) <> coalesce(b.quantity, 0) or coalesce(n.amount, 0) <> coalesce(b.amount, 0)) `

// firstMonth is the first month with usage, or month when it is earlier.
func firstMonth(ctx context.Context, q querier, month time.Time) (time.Time, error) {
	var first *time.Time
	if err := q.QueryRow(ctx, usageSpans+` select date_trunc('month', to_timestamp(min(coalesce(at_ns, t0)) / 1000000000)
		at time zone 'UTC')::date from spans`).Scan(&first); err != nil {
		return time.Time{}, fmt.Errorf("api: first month of usage: %w", err)
	}
	if first == nil || first.After(month) {
		return month, nil
	}
	return *first, nil
}

// closeMonth closes month (its first day, UTC) for everyone, with the
// platform fee feeBP. Months close in order, each once, after they end;
// the first close also bills any usage before it, as adjustments.
func (s *store) closeMonth(ctx context.Context, p *principal, month time.Time, feeBP int) (registryapi.MonthClosed, error) {
	out := registryapi.MonthClosed{Month: month.Format(monthLayout), FeeBasisPoints: feeBP}
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		// One close at a time, so that none bills what another is billing.
		if _, err := tx.Exec(ctx, `select pg_advisory_xact_lock(hashtext('statement_months'))`); err != nil {
			return auditEntry{}, err
		}
		var ended bool
		var last *time.Time
		if err := tx.QueryRow(ctx, `select ($1::date + interval '1 month') at time zone 'UTC' <= now(),
			(select max(month) from statement_months)`, month).Scan(&ended, &last); err != nil {
			return auditEntry{}, err
		}
		switch {
		case last != nil && !month.After(*last):
			return auditEntry{}, fmt.Errorf("%w: %s is closed", ErrConflict, out.Month)
		case !ended:
			return auditEntry{}, fieldErr("month", "has not ended: a month closes once it is over")
		case last != nil && !month.Equal(last.AddDate(0, 1, 0)):
			return auditEntry{}, fieldErr("month", "close %s first: months close in order", last.AddDate(0, 1, 0).Format(monthLayout))
		}
		if err := tx.QueryRow(ctx, `insert into statement_months (month, closed_by, fee_basis_points)
			values ($1, nullif($2, '')::uuid, $3) returning closed_at`, month, p.ID, feeBP).Scan(&out.ClosedAt); err != nil {
			return auditEntry{}, err
		}
		first, err := firstMonth(ctx, tx, month)
		if err != nil {
			return auditEntry{}, err
		}
		tag, err := tx.Exec(ctx, statementDiff+`insert into statement_lines (month, for_month, tenant_id, listing_id, isv_id,
			currency, version, unit, quantity, amount_micros)
			select $2, for_month, tenant_id, listing_id, isv_id, currency, version, unit, quantity, amount from diff`, first, month, month)
		if err != nil {
			return auditEntry{}, fmt.Errorf("api: close %s: %w", out.Month, err)
		}
		out.Lines = int(tag.RowsAffected())
		return auditEntry{"statement.close", "month", out.Month, map[string]any{"lines": out.Lines, "fee_basis_points": feeBP}}, nil
	})
	return out, err
}

const monthLayout = "2006-01"

// lineRow is a statement line with the parties it is between.
type lineRow struct {
	registryapi.StatementLine
	tenantID, tenant, isvID, isv, currency string
}

// monthState is whether month is closed, when, and at which fee.
type monthState struct {
	closedAt *time.Time
	feeBP    int
}

// monthLines returns month's lines of tenant and of isv ("": anyone's):
// those stored when it is closed, else what closing it would store once
// the months before it are closed, with the platform fee feeBP.
func (s *store) monthLines(ctx context.Context, month time.Time, tenant, isv string, feeBP int) (monthState, []lineRow, error) {
	st := monthState{feeBP: feeBP}
	var closedFee *int
	var last *time.Time
	err := s.db.QueryRow(ctx, `select m.closed_at, m.fee_basis_points, (select max(month) from statement_months)
		from (select) one left join statement_months m on m.month = $1`, month).Scan(&st.closedAt, &closedFee, &last)
	if err != nil {
		return st, nil, fmt.Errorf("api: month %s: %w", month.Format(monthLayout), err)
	}
	if closedFee != nil {
		st.feeBP = *closedFee
	}
	// cols reads diff; its parameters $n and $n+1 are tenant and isv.
	cols := func(n int) string {
		return fmt.Sprintf(` select to_char(d.for_month, 'YYYY-MM'), d.tenant_id::text, t.name, d.listing_id::text, l.name, d.isv_id::text,
		i.name, d.currency, d.version, d.unit, d.quantity, d.amount
		from diff d join accounts t on t.id = d.tenant_id join accounts i on i.id = d.isv_id join listings l on l.id = d.listing_id
		where ($%[1]d = '' or d.tenant_id::text = $%[1]d) and ($%[2]d = '' or d.isv_id::text = $%[2]d)
		order by t.name, d.currency, d.for_month, l.name, d.listing_id, d.version, d.unit`, n, n+1)
	}
	var rows pgx.Rows
	if st.closedAt != nil {
		rows, err = s.db.Query(ctx, `with diff as (select for_month, tenant_id, listing_id, isv_id, currency, version, unit,
			quantity, amount_micros as amount from statement_lines where month = $1)`+cols(2), month, tenant, isv)
	} else {
		var first time.Time
		if first, err = firstMonth(ctx, s.db, month); err != nil {
			return st, nil, err
		}
		adjustUntil := month // the first close bills all usage before it
		if last != nil {
			adjustUntil = *last
		}
		rows, err = s.db.Query(ctx, statementDiff+cols(4), first, month, adjustUntil, tenant, isv)
	}
	if err != nil {
		return st, nil, fmt.Errorf("api: lines of %s: %w", month.Format(monthLayout), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (lineRow, error) {
		var l lineRow
		err := r.Scan(&l.ForMonth, &l.tenantID, &l.tenant, &l.ListingID, &l.Listing, &l.isvID, &l.isv, &l.currency,
			&l.Version, &l.Unit, &l.Quantity, &l.AmountMicros)
		return l, err
	})
	if err != nil {
		return st, nil, fmt.Errorf("api: lines of %s: %w", month.Format(monthLayout), err)
	}
	return st, out, nil
}
