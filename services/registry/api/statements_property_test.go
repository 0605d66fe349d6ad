package api_test

import (
	"context"
	"flag"
	"math/big"
	"math/rand/v2"
	"net/url"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
)

var moneySeed = flag.Uint64("money.seed", 0, "seed of TestStatementsProperty (0: from the clock)")

// TestStatementsProperty: random price histories, free trials and usage, reported in
// batches between the closes of months (so that some of it is late); after
// each close, every month's invoices and revenue statements from the API
// equal, to the micro-unit, those worked out again in plain Go from the
// raw rows (statements_model_test.go); and so does each tenant's spend of
// the month running, which the spend limits check.
func TestStatementsProperty(t *testing.T) {
	seed := *moneySeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("-money.seed=%d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	feeBP := 1 + rng.IntN(10000)
	e := newEnvWith(t, api.Config{PlatformFeeBasisPoints: feeBP})
	m0 := monthsAgo(4)
	span := m0.AddDate(0, 4, 0).Sub(m0)
	randTime := func(from time.Time, d time.Duration) time.Time {
		return from.Add(time.Duration(rng.Int64N(int64(d))))
	}

	type listing struct {
		id      string
		digests []string // an image of no version, then versions 1 and 2
	}
	var listings []listing
	// Usage starts now and then exactly where a month or a price begins.
	var edges []time.Time
	for j := range 5 {
		edges = append(edges, m0.AddDate(0, j, 0))
	}
	for i, l := range []struct{ isv, currency string }{{"isv1", "USD"}, {"isv1", "EUR"}, {"isv2", "USD"}} {
		repo := l.isv + "/p" + string(rune('a'+i))
		var L registryapi.Listing
		trial := 0 // hours free per tenant: none, or some that a few records use up
		if i == 0 || rng.IntN(2) > 0 {
			trial = 1 + rng.IntN(150)
		}
		e.must(201, l.isv, "POST", "/listings", item{"name": uniq("p"), "repository": repo, "currency": l.currency,
			"trial_hours": trial}).decode(t, &L)
		digests := []string{"sha256:" + uniq("unversioned")}
		for v := range 2 {
			d := e.pushManifest(repo, uniq("t"))
			e.must(201, l.isv, "POST", "/listings/"+L.ID+"/versions", item{"version": string(rune('1' + v)), "digest": d})
			digests = append(digests, d)
		}
		listings = append(listings, listing{L.ID, digests})
		for range 1 + rng.IntN(5) {
			from := randTime(m0.AddDate(0, -1, 0), span)
			e.pastPrice(t, L.ID, from, rng.Int64N(5_000_000), rng.Int64N(50_000_000), rng.Int64N(50_000_000))
			edges = append(edges, from)
		}
	}
	report := func(n int) {
		for range n {
			l := listings[rng.IntN(len(listings))]
			r := record{tenant: []string{"tenant1", "tenant2"}[rng.IntN(2)], listing: l.id, digest: l.digests[rng.IntN(len(l.digests))],
				event: []string{"load", "load", "busy", "busy", "attach", "clear"}[rng.IntN(6)]}
			start := randTime(m0.AddDate(0, 0, -20), span)
			if rng.IntN(4) == 0 {
				start = edges[rng.IntN(len(edges))]
			}
			switch r.event {
			case "load":
				r.start = at(start)
			case "busy":
				r.busyNs = rng.Int64N(int64(80 * time.Hour))
				switch rng.IntN(3) {
				case 0:
					r.end = at(start)
				case 1:
					r.start = at(start)
				} // else: it ended when it was reported
			default:
				r.start = at(start)
				if rng.IntN(5) > 0 {
					r.end = at(start.Add(time.Duration(rng.Int64N(int64(45 * 24 * time.Hour)))))
				}
			}
			e.record(t, r)
		}
	}

	m := newModel()
	for k := range 3 {
		report(40)
		month := m0.AddDate(0, k, 0)
		if _, err := e.client("admin").CloseMonth(context.Background(), month.Format("2006-01")); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		m.load(t, e)
		m.close(month, now)
		for j := range 4 {
			checkMonth(t, e, m, m0.AddDate(0, j, 0), now, feeBP)
		}
		checkSpend(t, e, m, m0.AddDate(0, 4, 0))
	}
}

// checkSpend compares each tenant's spend of the month running (every
// record was recorded in it) with the model's price of that month's
// usage. An attachment still open costs up to the API's now, which lies
// between the two clocks read around the calls; the spend only grows with
// now, so it lies between the model's at each.
func checkSpend(t *testing.T, e *env, m *model, month time.Time) {
	t.Helper()
	spend := func(now time.Time) map[[2]string]int64 {
		out := map[[2]string]int64{}
		for k, a := range m.usage([]time.Time{month}, now) {
			out[[2]string{k.tenant, m.currency[k.listing]}] += a.amount
		}
		return out
	}
	before := time.Now()
	got := map[[2]string]int64{}
	for _, who := range []string{"tenant1", "tenant2"} {
		sl, err := e.client("admin").SpendLimits(context.Background(), who)
		if err != nil || sl.Month != month.Format("2006-01") {
			t.Fatalf("spend of %s: %+v %v", who, sl, err)
		}
		for _, l := range sl.Items {
			got[[2]string{e.users[who].ID, l.Currency}] = l.SpendMicros
		}
	}
	lo, hi := spend(before), spend(time.Now())
	for k := range hi {
		if got[k] < lo[k] || got[k] > hi[k] {
			t.Errorf("spend of %s in %s: API %d, recomputed %d to %d", k[0], k[1], got[k], lo[k], hi[k])
		}
	}
	for k, g := range got {
		if _, ok := hi[k]; !ok && g != 0 {
			t.Errorf("spend of %s in %s: API %d, recomputed none", k[0], k[1], g)
		}
	}
}

// checkMonth compares the API's invoices and revenue statements of month
// with the model's.
func checkMonth(t *testing.T, e *env, m *model, month, now time.Time, feeBP int) {
	t.Helper()
	ctx := context.Background()
	name := month.Format("2006-01")
	want := m.statement(month, now)
	invs, err := e.client("admin").Invoices(ctx, url.Values{"month": {name}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[modelKey]modelAmount{}
	for _, inv := range invs {
		var total int64
		for _, l := range inv.Lines {
			k := modelKey{l.ForMonth, inv.TenantID, l.ListingID, l.Version, l.Unit}
			if _, dup := got[k]; dup || m.currency[l.ListingID] != inv.Currency {
				t.Errorf("%s: line %+v twice, or on the invoice of the wrong currency %s", name, l, inv.Currency)
			}
			got[k] = modelAmount{l.Quantity, l.AmountMicros}
			total += l.AmountMicros
		}
		if total != inv.TotalMicros {
			t.Errorf("%s: invoice of %s %s totals %d, its lines %d", name, inv.Tenant, inv.Currency, inv.TotalMicros, total)
		}
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: line %+v: API %+v, recomputed %+v", name, k, got[k], w)
		}
	}
	for k, g := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: line %+v: API %+v, recomputed none", name, k, g)
		}
	}

	type party struct{ isv, currency string }
	type revenueKey struct {
		party
		forMonth, listing, version, unit string
	}
	gross := map[party]int64{}
	lines := map[revenueKey]modelAmount{}
	for k, w := range want {
		p := party{m.isv[k.listing], m.currency[k.listing]}
		gross[p] += w.amount
		rk := revenueKey{p, k.forMonth, k.listing, k.version, k.unit}
		lines[rk] = modelAmount{lines[rk].quantity + w.quantity, lines[rk].amount + w.amount}
	}
	ss, err := e.client("admin").RevenueStatements(ctx, url.Values{"month": {name}})
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != len(gross) {
		t.Errorf("%s: %d revenue statements, want %d", name, len(ss), len(gross))
	}
	for _, s := range ss {
		g := gross[party{s.ISVID, s.Currency}]
		fee := new(big.Int).Div(big.NewInt(g*int64(feeBP)), big.NewInt(10000)).Int64()
		if s.GrossMicros != g || s.FeeMicros != fee || s.NetMicros != g-fee || s.FeeBasisPoints != feeBP {
			t.Errorf("%s: statement %+v, want gross %d, fee %d (%d bp)", name, s, g, fee, feeBP)
		}
		for _, l := range s.Lines {
			rk := revenueKey{party{s.ISVID, s.Currency}, l.ForMonth, l.ListingID, l.Version, l.Unit}
			if w, ok := lines[rk]; !ok || w != (modelAmount{l.Quantity, l.AmountMicros}) {
				t.Errorf("%s: revenue line %+v of %s, recomputed %+v", name, l, s.ISV, w)
			}
			delete(lines, rk)
		}
	}
	for rk, w := range lines {
		t.Errorf("%s: revenue line %+v %+v recomputed, not in the API's statements", name, rk, w)
	}
}
