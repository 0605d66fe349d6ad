package api_test

import (
	"context"
	"math"
	"math/big"
	"sort"
	"testing"
	"time"
)

// The statements of a month worked out again in plain Go, from the rows
// of usage_records, listing_prices, listing_versions and listings, to
// hold the registry's SQL to the rules of docs/ARCHITECTURE.md, "Money",
// to the micro-unit.

type modelPrice struct {
	from, until          int64 // ns; math.MinInt64 / math.MaxInt64 unbounded
	load, hour, attached int64
}

type modelRecord struct {
	id                             int64
	tenant, listing, digest, event string
	busyNs                         int64
	started, ended                 *time.Time
	recorded                       time.Time
}

type modelVersion struct {
	listing, version, digest string
	created                  time.Time
}

// modelKey identifies a line: a tenant's usage of a listing version in a
// unit, in for_month.
type modelKey struct {
	forMonth, tenant, listing, version, unit string
}

type modelAmount struct{ quantity, amount int64 }

type model struct {
	prices   map[string][]modelPrice // by listing, in time order
	records  []modelRecord
	versions []modelVersion
	isv      map[string]string // listing → owner
	currency map[string]string // listing → currency
	trial    map[string]int64  // listing → free-trial hours
	billed   map[modelKey]modelAmount
	stored   map[string]map[modelKey]modelAmount // closed month → its lines
}

func newModel() *model {
	return &model{billed: map[modelKey]modelAmount{}, stored: map[string]map[modelKey]modelAmount{}}
}

// load reads the raw rows the registry's statements come from.
func (m *model) load(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	m.prices, m.isv, m.currency, m.records, m.versions = map[string][]modelPrice{}, map[string]string{}, map[string]string{}, nil, nil
	m.trial = map[string]int64{}
	rows, err := e.pool.Query(ctx, `select listing_id::text, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros
		from listing_prices order by listing_id, effective_at`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l string
		var at time.Time
		var p modelPrice
		if err := rows.Scan(&l, &at, &p.load, &p.hour, &p.attached); err != nil {
			t.Fatal(err)
		}
		p.from, p.until = at.UnixNano(), math.MaxInt64
		ps := m.prices[l]
		if len(ps) == 0 {
			p.from = math.MinInt64 // the first price also covers what came before
		} else {
			ps[len(ps)-1].until = at.UnixNano()
		}
		m.prices[l] = append(ps, p)
	}
	if rows, err = e.pool.Query(ctx, `select id, tenant_id::text, listing_id::text, coalesce(manifest_digest, ''), event, busy_ns,
		started_at, ended_at, recorded_at from usage_records where listing_id is not null`); err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var r modelRecord
		if err := rows.Scan(&r.id, &r.tenant, &r.listing, &r.digest, &r.event, &r.busyNs, &r.started, &r.ended, &r.recorded); err != nil {
			t.Fatal(err)
		}
		m.records = append(m.records, r)
	}
	if rows, err = e.pool.Query(ctx, `select listing_id::text, version, manifest_digest, created_at from listing_versions`); err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var v modelVersion
		if err := rows.Scan(&v.listing, &v.version, &v.digest, &v.created); err != nil {
			t.Fatal(err)
		}
		m.versions = append(m.versions, v)
	}
	if rows, err = e.pool.Query(ctx, `select id::text, owner_id::text, currency, trial_hours from listings`); err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, owner, cur string
		var trial int64
		if err := rows.Scan(&id, &owner, &cur, &trial); err != nil {
			t.Fatal(err)
		}
		m.isv[id], m.currency[id], m.trial[id] = owner, cur, trial
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
}

// version is the listing's first version of digest, "" when none.
func (m *model) version(listing, digest string) string {
	vs := append([]modelVersion(nil), m.versions...)
	sort.Slice(vs, func(i, j int) bool {
		if !vs[i].created.Equal(vs[j].created) {
			return vs[i].created.Before(vs[j].created)
		}
		return vs[i].version < vs[j].version
	})
	for _, v := range vs {
		if v.listing == listing && v.digest == digest {
			return v.version
		}
	}
	return ""
}

// span is a record's time: a point (a load) or [t0, t1).
func (r modelRecord) span(now time.Time) (t0, t1 int64, point bool) {
	ns := func(t *time.Time) int64 { return t.UnixNano() }
	switch r.event {
	case "load":
		if r.started != nil {
			return ns(r.started), 0, true
		}
		return r.recorded.UnixNano(), 0, true
	case "busy":
		end := r.recorded.UnixNano()
		switch {
		case r.ended != nil:
			end = ns(r.ended)
		case r.started != nil:
			end = ns(r.started) + r.busyNs
		}
		return end - r.busyNs, end, false
	}
	end := now
	if r.ended != nil {
		end = *r.ended
	}
	return ns(r.started), end.UnixNano(), false
}

// free is, per record (by index), the nanoseconds at its start that its
// listing's free trial covers: each tenant's busy and attach records of a
// listing in order of start (then id), free while the trial's hours last.
func (m *model) free(now time.Time) map[int]int64 {
	type tl struct{ tenant, listing string }
	groups := map[tl][]int{}
	for i, r := range m.records {
		if r.event == "busy" || r.event == "attach" {
			groups[tl{r.tenant, r.listing}] = append(groups[tl{r.tenant, r.listing}], i)
		}
	}
	out := map[int]int64{}
	for k, is := range groups {
		sort.Slice(is, func(a, b int) bool {
			ta, _, _ := m.records[is[a]].span(now)
			tb, _, _ := m.records[is[b]].span(now)
			if ta != tb {
				return ta < tb
			}
			return m.records[is[a]].id < m.records[is[b]].id
		})
		left := m.trial[k.listing] * time.Hour.Nanoseconds()
		for _, i := range is {
			t0, t1, _ := m.records[i].span(now)
			d := max(t1-t0, 0)
			out[i] = max(min(d, left), 0)
			left -= d
		}
	}
	return out
}

// usage is what the records of the months cost, line by line: loads at
// their price, time split at price changes and month ends, rounded down
// once per line; the trial's time on its own line, free.
func (m *model) usage(months []time.Time, now time.Time) map[modelKey]modelAmount {
	value := map[modelKey]*big.Int{}
	out := map[modelKey]modelAmount{}
	units := map[string]string{"load": "load", "busy": "loaded_hour", "attach": "attached_hour"}
	free := m.free(now)
	for i, r := range m.records {
		unit, ok := units[r.event]
		if !ok {
			continue
		}
		t0, t1, point := r.span(now)
		f1 := t0 + free[i]
		for _, ms := range months {
			w0, w1 := ms.UnixNano(), ms.AddDate(0, 1, 0).UnixNano()
			k := modelKey{ms.Format("2006-01"), r.tenant, r.listing, m.version(r.listing, r.digest), unit}
			a := out[k]
			if point {
				if t0 < w0 || t0 >= w1 {
					continue
				}
				for _, p := range m.prices[r.listing] {
					if t0 >= p.from && t0 < p.until {
						a.amount += p.load
					}
				}
				a.quantity++
				out[k] = a
				continue
			}
			in := min(t1, w1) - max(t0, w0)
			if in <= 0 {
				continue
			}
			freeIn := max(min(f1, w1)-max(t0, w0), 0)
			a.quantity += in - freeIn
			out[k] = a
			if freeIn > 0 {
				tk := k
				tk.unit = "trial_hour"
				out[tk] = modelAmount{out[tk].quantity + freeIn, 0}
			}
			if value[k] == nil {
				value[k] = new(big.Int)
			}
			for _, p := range m.prices[r.listing] {
				price := p.hour
				if r.event == "attach" {
					price = p.attached
				}
				if d := min(t1, p.until, w1) - max(f1, p.from, w0); d > 0 {
					value[k].Add(value[k], new(big.Int).Mul(big.NewInt(d), big.NewInt(price)))
				}
			}
		}
	}
	for k, v := range value {
		a := out[k]
		a.amount = new(big.Int).Quo(v, big.NewInt(time.Hour.Nanoseconds())).Int64()
		out[k] = a
	}
	return out
}

// lines are the lines a close of month would store now: what its usage,
// and that of the months up to adjustUntil, costs less what earlier
// closes billed.
func (m *model) lines(month, adjustUntil, now time.Time) map[modelKey]modelAmount {
	first := month
	for _, r := range m.records {
		if _, ok := map[string]bool{"load": true, "busy": true, "attach": true}[r.event]; !ok {
			continue
		}
		t0, _, _ := r.span(now)
		u := time.Unix(0, t0).UTC()
		if ms := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC); ms.Before(first) {
			first = ms
		}
	}
	var months []time.Time
	for ms := first; !ms.After(month); ms = ms.AddDate(0, 1, 0) {
		if !ms.After(adjustUntil) || ms.Equal(month) {
			months = append(months, ms)
		}
	}
	diff := map[modelKey]modelAmount{}
	cost := m.usage(months, now)
	for k, a := range cost {
		b := m.billed[k]
		if d := (modelAmount{a.quantity - b.quantity, a.amount - b.amount}); d != (modelAmount{}) {
			diff[k] = d
		}
	}
	for k, b := range m.billed {
		if _, ok := cost[k]; !ok && k.forMonth >= first.Format("2006-01") && b != (modelAmount{}) {
			diff[k] = modelAmount{-b.quantity, -b.amount}
		}
	}
	return diff
}

// close stores month's lines, as POST /months/{month}/close does.
func (m *model) close(month, now time.Time) {
	ls := m.lines(month, month, now)
	for k, a := range ls {
		b := m.billed[k]
		m.billed[k] = modelAmount{b.quantity + a.quantity, b.amount + a.amount}
	}
	m.stored[month.Format("2006-01")] = ls
}

// statement is month's lines: stored once closed, else a preview of its
// close once the months before it are closed.
func (m *model) statement(month, now time.Time) map[modelKey]modelAmount {
	if ls, ok := m.stored[month.Format("2006-01")]; ok {
		return ls
	}
	var last time.Time
	for name := range m.stored {
		if t, _ := time.Parse("2006-01", name); t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		last = month // the first close bills all usage before it
	}
	return m.lines(month, last, now)
}
