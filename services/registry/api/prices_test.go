package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

func (e *env) client(who string) *registryclient.Client {
	e.t.Helper()
	c, err := registryclient.New(e.url, registryclient.WithToken(e.users[who].token))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func i64(v int64) *int64 { return &v }

// wantField fails t unless err is the API's refusal of field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var re *registryclient.Error
	if !errors.As(err, &re) || re.Status != 422 || re.Field != field {
		t.Fatalf("got %v, want a refusal of field %q", err, field)
	}
}

// TestPriceHistory: a listing's prices change only from now on, their
// history is kept, and a listing's fields show the prices in force.
func TestPriceHistory(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	isv := e.client("isv1")
	name := "priced"
	l, err := isv.CreateListing(ctx, registryapi.NewListing{Repository: "isv1/priced", ListingFields: registryapi.ListingFields{
		Name: &name, PricePerHourMicros: i64(3_600_000), PricePerLoadMicros: i64(1000)}})
	if err != nil {
		t.Fatal(err)
	}
	prices := func(n int) []registryapi.Price {
		t.Helper()
		ps, err := isv.Prices(ctx, l.ID)
		if err != nil || len(ps) != n {
			t.Fatalf("prices %+v, %v; want %d", ps, err, n)
		}
		return ps
	}
	if ps := prices(1); !ps[0].EffectiveAt.Equal(l.CreatedAt) || ps[0].PerHourMicros != 3_600_000 || ps[0].PerLoadMicros != 1000 {
		t.Fatalf("first price %+v of listing created %v", ps[0], l.CreatedAt)
	}

	// Saving unchanged prices (as the portal's form does) adds no history.
	summary := "s"
	if _, err := isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{Summary: &summary, PricePerHourMicros: i64(3_600_000)}); err != nil {
		t.Fatal(err)
	}
	prices(1)
	l, err = isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{PricePerLoadMicros: i64(2000)})
	if err != nil || l.PricePerLoadMicros != 2000 || l.PricePerHourMicros != 3_600_000 {
		t.Fatalf("after a change of the load price: %+v, %v", l, err)
	}
	if ps := prices(2); ps[1].PerLoadMicros != 2000 || ps[1].PerHourMicros != 3_600_000 || ps[0].PerLoadMicros != 1000 {
		t.Fatalf("history %+v", ps)
	}

	// A price scheduled for later shows in the history, not in the listing.
	later := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := isv.SetPrice(ctx, l.ID, registryapi.NewPrice{EffectiveAt: &later, PerAttachedHourMicros: i64(5000)}); err != nil {
		t.Fatal(err)
	}
	p, err := isv.SetPrice(ctx, l.ID, registryapi.NewPrice{EffectiveAt: &later, PerAttachedHourMicros: i64(7000)})
	if err != nil || p.PerAttachedHourMicros != 7000 || p.PerLoadMicros != 2000 || !p.EffectiveAt.Equal(later) {
		t.Fatalf("replacing the scheduled price: %+v, %v", p, err)
	}
	prices(3)
	if l, err = isv.Listing(ctx, l.ID); err != nil || l.PricePerAttachedHourMicros != 0 {
		t.Fatalf("listing before its scheduled price: %+v, %v", l, err)
	}

	// Never backwards, never negative, only by the owner or an admin.
	past := time.Now().Add(-time.Minute)
	_, err = isv.SetPrice(ctx, l.ID, registryapi.NewPrice{EffectiveAt: &past, PerLoadMicros: i64(1)})
	wantField(t, err, "effective_at")
	_, err = isv.SetPrice(ctx, l.ID, registryapi.NewPrice{PerLoadMicros: i64(-1)})
	wantField(t, err, "per_load_micros")
	_, err = isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{PricePerAttachedHourMicros: i64(registryapi.MaxPriceMicros + 1)})
	wantField(t, err, "price_per_attached_hour_micros")
	for _, who := range []string{"isv2", "tenant1"} {
		var re *registryclient.Error
		if _, err := e.client(who).SetPrice(ctx, l.ID, registryapi.NewPrice{PerLoadMicros: i64(1)}); !errors.As(err, &re) || re.Status < 400 {
			t.Errorf("%s set a price of isv1's listing: %v", who, err)
		}
	}
	if _, err := e.pool.Exec(ctx, `update listing_prices set per_load_micros = 1 where listing_id = $1::uuid and effective_at <= now()`, l.ID); err == nil {
		t.Error("the database let a price in force be rewritten")
	}
	prices(3)

	// The currency is fixed once usage is priced in it.
	eur := "EUR"
	if _, err := isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{Currency: &eur}); err != nil {
		t.Fatal(err)
	}
	e.usage(t, l.ID, "load", time.Now(), time.Time{}, 0)
	usd := "USD"
	_, err = isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{Currency: &usd})
	wantField(t, err, "currency")
	if _, err := isv.UpdateListing(ctx, l.ID, registryapi.ListingFields{Currency: &eur}); err != nil {
		t.Fatalf("saving the same currency: %v", err)
	}
}

// usage stores a usage record of tenant1 on listing as a node would have
// reported it: a load at start, busy time ending at end, or an attachment
// held from start to end (open when end is zero).
func (e *env) usage(t *testing.T, listing, event string, start, end time.Time, busyNs int64) {
	t.Helper()
	if e.nodeID == "" {
		var n registryapi.Node
		e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &n)
		e.nodeID = n.ID
	}
	var endAt *time.Time
	if !end.IsZero() {
		endAt = &end
	}
	if _, err := e.pool.Exec(context.Background(), `insert into usage_records (node_id, tenant_id, listing_id, event, busy_ns,
		started_at, ended_at, report_id) values ($1::uuid, $2::uuid, $3::uuid, $4, $5, $6, $7, $8)`,
		e.nodeID, e.users["tenant1"].ID, listing, event, busyNs, start, endAt, uniq("r")); err != nil {
		t.Fatal(err)
	}
}
