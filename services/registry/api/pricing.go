package api

// Pricing ---------------------------------------------------------------------------
//
// How usage becomes money (docs/ARCHITECTURE.md, "Money"). Amounts are
// integer micro-units of the listing's currency; times are nanoseconds
// since the epoch, exact for the database's microsecond timestamps, and
// all arithmetic is on PostgreSQL numeric, so nothing is lost before the
// one rounding of a line.
//
//   - A load costs the per-load price in force at the load's time: the
//     record's started_at, or when it was recorded.
//   - Busy time costs the per-hour price, over busy_ns ending at the
//     record's ended_at (else at started_at + busy_ns, else when it was
//     recorded).
//   - An attachment of the pool costs the per-attached-hour price from its
//     creation to its end (a live one's until now).
//   - Time that crosses a price change is split at the change, each part
//     priced at its own price. A listing's first price also covers any
//     time before it (a record's clock may be behind the registry's, and
//     the listing was priced so from its creation).
//   - A line (a sum of records) is the exact sum of its parts, rounded down
//     to the micro-unit once: a tenant never pays for a fraction of a
//     micro-unit, and a line's amount does not depend on how its records
//     were batched.
//   - A listing's free trial (trial_hours) makes the first hours of each
//     tenant's loaded and attached time of it, in total over all months,
//     free: the tenant's busy and attach records of the listing are taken
//     in order of their start (then id), and the first part of each is
//     free while the allowance lasts. The free time is billed on its own
//     trial_hour line at amount 0 (so the ISV's gross excludes it); the
//     loaded_hour and attached_hour lines bill the rest.

// nsPerHour divides a time value (nanoseconds × micro-units per hour) into
// micro-units.
const nsPerHour = `3600000000000`

// usageSpans is a with clause that defines prices (each listing's prices
// with [p0, p1), the nanoseconds they are in force) and spans: the usage
// records of listings with at_ns (a load's time), [t0, t1) (the time a
// busy or attach record covers) and f1, the end of the part of [t0, t1)
// that the listing's free trial covers (t0 when none).
var usageSpans = usageSpansFrom("usage_records u")

// usageSpansFrom is usageSpans over the records of source, a table
// expression of usage_records rows named u. The trial's allowance is
// counted over those records, so a source must hold all of a tenant's
// records of a listing with a trial for its f1 to be right (spendQuery's
// does).
func usageSpansFrom(source string) string {
	return `with prices as (
	select listing_id, case when lag(effective_at) over (partition by listing_id order by effective_at) is null then '-infinity'
			else extract(epoch from effective_at) * 1000000000 end as p0,
		coalesce(extract(epoch from lead(effective_at) over (partition by listing_id order by effective_at)) * 1000000000,
			'infinity') as p1,
		per_load_micros, per_hour_micros, per_attached_hour_micros
	from listing_prices),
raw as (
	select u.*,
		case when u.event = 'load' then extract(epoch from coalesce(u.started_at, u.recorded_at)) * 1000000000 end as at_ns,
		case u.event when 'busy' then b.end_ns - u.busy_ns
			when 'attach' then extract(epoch from u.started_at) * 1000000000 end as t0,
		case u.event when 'busy' then b.end_ns
			when 'attach' then extract(epoch from coalesce(u.ended_at, now())) * 1000000000 end as t1
	from ` + source + `, lateral (select coalesce(extract(epoch from u.ended_at) * 1000000000,
		extract(epoch from u.started_at) * 1000000000 + u.busy_ns, extract(epoch from u.recorded_at) * 1000000000) as end_ns) b
	where u.listing_id is not null),
spans as (
	select r.*, r.t0 + greatest(0, least(greatest(r.t1 - r.t0, 0), l.trial_hours * ` + nsPerHour + `::numeric
		- coalesce(sum(greatest(r.t1 - r.t0, 0)) over (partition by r.tenant_id, r.listing_id order by r.t0, r.id
			rows between unbounded preceding and 1 preceding), 0))) as f1
	from raw r join listings l on l.id = r.listing_id)`
}

// allTime is the windows of pricedUsage that price each record whole.
const allTime = `windows as (select null::date as month, '-infinity'::numeric as w0, 'infinity'::numeric as w1)`

// pricedUsage returns a with clause that defines priced: the spans of
// usageSpans within each window of windows (a with item "windows" of
// month, [w0, w1) in nanoseconds) they fall in, a record without a time
// (a clear) in every window. Of its part in a window it adds ns_in (its
// time), ns_free (the part of it the trial covers), load_micros (a load's
// price) and time_value (its time less the free part, times the hourly
// prices in force, nanoseconds × micro-units per hour, unrounded). The
// query follows it.
func pricedUsage(windows string) string {
	return pricedSpans(usageSpans, windows)
}

// pricedSpans is pricedUsage over spans, a with clause of usageSpansFrom.
// Each span reads its listing's prices from arrays joined by hash: a
// subquery over the prices themselves would scan every listing's prices for
// every span (a with item has no index), which grows with the catalog.
func pricedSpans(spans, windows string) string {
	return spans + `, ` + windows + `,
price_lists as (
	select listing_id, array_agg(p0 order by p0) as p0, array_agg(p1 order by p0) as p1,
		array_agg(per_load_micros order by p0) as per_load, array_agg(per_hour_micros order by p0) as per_hour,
		array_agg(per_attached_hour_micros order by p0) as per_attached
	from prices group by listing_id),
priced as (
	select s.*, w.month, coalesce(greatest(least(s.t1, w.w1) - greatest(s.t0, w.w0), 0), 0) as ns_in,
		-- least and greatest skip nulls: a load (no f1) has no free time
		case when s.f1 is null then 0 else greatest(least(s.f1, w.w1) - greatest(s.t0, w.w0), 0) end as ns_free,
		coalesce((select p.per_load_micros from unnest(pl.p0, pl.p1, pl.per_load) p(p0, p1, per_load_micros)
			where s.at_ns >= p.p0 and s.at_ns < p.p1), 0) as load_micros,
		coalesce((select sum((least(s.t1, p.p1, w.w1) - greatest(s.f1, p.p0, w.w0))
				* case s.event when 'busy' then p.per_hour_micros else p.per_attached_hour_micros end)
			from unnest(pl.p0, pl.p1, pl.per_hour, pl.per_attached) p(p0, p1, per_hour_micros, per_attached_hour_micros)
			where p.p0 < least(s.t1, w.w1) and p.p1 > greatest(s.f1, w.w0)
			and greatest(s.f1, w.w0) < least(s.t1, w.w1)), 0) as time_value
	from spans s join windows w on (s.at_ns is null and s.t0 is null) or (s.at_ns >= w.w0 and s.at_ns < w.w1)
		or (s.t0 < w.w1 and s.t1 > w.w0)
	left join price_lists pl on pl.listing_id = s.listing_id) `
}
