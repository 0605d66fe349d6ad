package api_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/api"
)

// pastPrice writes a price of listing effective at, in the past: history
// as it would have been written then, which the database refuses to write
// now (hence triggers off for this one transaction).
func (e *env) pastPrice(t *testing.T, listing string, at time.Time, load, hour, attached int64) {
	t.Helper()
	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `set local session_replication_role = replica`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros,
		per_attached_hour_micros) values ($1::uuid, $2, $3, $4, $5)`, listing, at, load, hour, attached); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// record is a usage record as the tests write them straight into the
// database, the way POST /usage stores a node's report.
type record struct {
	tenant, listing, digest, event string
	start, end                     *time.Time // nil: not reported
	busyNs                         int64
}

func (e *env) record(t *testing.T, r record) {
	t.Helper()
	if e.nodeID == "" {
		var n registryapi.Node
		e.must(201, "node1", "POST", "/nodes", item{"hostname": "n1", "public_key": x25519B64(t)}).decode(t, &n)
		e.nodeID = n.ID
	}
	var digest *string
	if r.digest != "" {
		digest = &r.digest
	}
	if _, err := e.pool.Exec(context.Background(), `insert into usage_records (node_id, tenant_id, listing_id, manifest_digest,
		event, busy_ns, started_at, ended_at, report_id) values ($1::uuid, $2::uuid, $3::uuid, $4, $5, $6, $7, $8, $9)`,
		e.nodeID, e.users[r.tenant].ID, r.listing, digest, r.event, r.busyNs, r.start, r.end, uniq("r")); err != nil {
		t.Fatal(err)
	}
}

func at(t time.Time) *time.Time { return &t }

// monthsAgo is the first instant (UTC) of the month n months before this one.
func monthsAgo(n int) time.Time {
	y, m, _ := time.Now().UTC().Date()
	return time.Date(y, m-time.Month(n), 1, 0, 0, 0, 0, time.UTC)
}

// TestStatementsByHand: amounts worked out by hand, for a price change
// inside a busy span, an attachment across a month's end, rounding once
// per line, a late report billed as an adjustment, and who sees what.
func TestStatementsByHand(t *testing.T) {
	e := newEnvWith(t, api.Config{PlatformFeeBasisPoints: 1250})
	ctx := context.Background()
	d := e.pushManifest("isv1/dnn", "v1")
	var L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "dnn", "repository": "isv1/dnn"}).decode(t, &L)
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": "1", "digest": d})
	m0 := monthsAgo(3)
	m1, change := m0.AddDate(0, 1, 0), m0.AddDate(0, 0, 10)
	e.pastPrice(t, L.ID, m0.AddDate(0, -1, 0), 1000, 3_600_000, 7_200_000)
	e.pastPrice(t, L.ID, change, 2000, 7_200_000, 3_600_000)
	hour := time.Hour.Nanoseconds()
	for _, r := range []record{
		{tenant: "tenant1", event: "load", start: at(m0.AddDate(0, 0, 5))},                                       // 1000
		{tenant: "tenant1", event: "load", start: at(change)},                                                    // 2000: in force from its time
		{tenant: "tenant1", event: "busy", end: at(change.Add(30 * time.Minute)), busyNs: hour},                  // 1,800,000 + 3,600,000
		{tenant: "tenant1", event: "attach", start: at(m1.Add(-time.Hour)), end: at(m1.Add(2 * time.Hour))},      // 3,600,000 | 7,200,000
		{tenant: "tenant1", event: "busy", digest: "sha256:other", end: at(m0.AddDate(0, 0, 20)), busyNs: 250e3}, // 0.5
		{tenant: "tenant1", event: "busy", digest: "sha256:other", end: at(m0.AddDate(0, 0, 21)), busyNs: 250e3}, // 0.5: 1 per line
		{tenant: "tenant2", event: "load", start: at(m1.AddDate(0, 0, 1))},                                       // 2000
		{tenant: "tenant2", event: "clear", start: at(m1), end: at(m1.AddDate(0, 0, 1))},                         // free
	} {
		r.listing = L.ID
		if r.digest == "" {
			r.digest = d
		}
		e.record(t, r)
	}
	admin, t1 := e.client("admin"), e.client("tenant1")
	_, err := admin.CloseMonth(ctx, monthsAgo(0).Format("2006-01"))
	wantField(t, err, "month")
	// Operators closing the same month at once: one close stores it.
	closes := make(chan error, 3)
	for range cap(closes) {
		go func() { _, err := admin.CloseMonth(ctx, m0.Format("2006-01")); closes <- err }()
	}
	var ok int
	for range cap(closes) {
		var re *registryclient.Error
		switch err := <-closes; {
		case err == nil:
			ok++
		case !errors.As(err, &re) || re.Status != 409:
			t.Fatalf("a concurrent close: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent closes of %s succeeded", ok, m0.Format("2006-01"))
	}
	M0, M1 := m0.Format("2006-01"), m1.Format("2006-01")
	want0 := []registryapi.StatementLine{
		{ForMonth: M0, ListingID: L.ID, Listing: "dnn", Version: "", Unit: "loaded_hour", Quantity: 500e3, AmountMicros: 1},
		{ForMonth: M0, ListingID: L.ID, Listing: "dnn", Version: "1", Unit: "attached_hour", Quantity: hour, AmountMicros: 3_600_000},
		{ForMonth: M0, ListingID: L.ID, Listing: "dnn", Version: "1", Unit: "load", Quantity: 2, AmountMicros: 3000},
		{ForMonth: M0, ListingID: L.ID, Listing: "dnn", Version: "1", Unit: "loaded_hour", Quantity: hour, AmountMicros: 5_400_000},
	}
	checkInvoice(t, t1, M0, want0, 9_003_001)
	// M1 is not closed: a preview of M2 leaves M1's usage to M1.
	if inv, err := t1.Invoices(ctx, url.Values{"month": {m0.AddDate(0, 2, 0).Format("2006-01")}}); err != nil || len(inv) != 0 {
		t.Fatalf("preview of the month after an open one: %+v, %v", inv, err)
	}
	// A node's late report of M0 changes nothing of M0, and is billed with M1.
	e.record(t, record{tenant: "tenant1", listing: L.ID, digest: d, event: "load", start: at(m0.AddDate(0, 0, 3))})
	checkInvoice(t, t1, M0, want0, 9_003_001)
	var re *registryclient.Error
	if _, err := admin.CloseMonth(ctx, M0); !errors.As(err, &re) || re.Status != 409 {
		t.Fatalf("closing %s again: %v", M0, err)
	}
	_, err = admin.CloseMonth(ctx, m0.AddDate(0, 2, 0).Format("2006-01"))
	wantField(t, err, "month")
	if _, err := admin.CloseMonth(ctx, M1); err != nil {
		t.Fatal(err)
	}
	checkInvoice(t, t1, M1, []registryapi.StatementLine{
		{ForMonth: M0, ListingID: L.ID, Listing: "dnn", Version: "1", Unit: "load", Quantity: 1, AmountMicros: 1000},
		{ForMonth: M1, ListingID: L.ID, Listing: "dnn", Version: "1", Unit: "attached_hour", Quantity: 2 * hour, AmountMicros: 7_200_000},
	}, 7_201_000)

	// ISV: the tenants' lines summed, 12.5% fee rounded down.
	ss, err := e.client("isv1").RevenueStatements(ctx, url.Values{"month": {M0}})
	if err != nil || len(ss) != 1 || ss[0].GrossMicros != 9_003_001 || ss[0].FeeMicros != 1_125_375 || ss[0].NetMicros != 7_877_626 ||
		ss[0].FeeBasisPoints != 1250 || !ss[0].Closed {
		t.Fatalf("isv1's statement of %s: %+v, %v", M0, ss, err)
	}
	if ss, err := e.client("isv1").RevenueStatements(ctx, url.Values{"month": {M1}}); err != nil || len(ss) != 1 || ss[0].GrossMicros != 7_203_000 {
		t.Fatalf("isv1's statement of %s: %+v, %v", M1, ss, err)
	}
	if ss, err := e.client("isv2").RevenueStatements(ctx, url.Values{"month": {M0}}); err != nil || len(ss) != 0 {
		t.Fatalf("isv2 sees %+v, %v", ss, err)
	}
	if inv, err := admin.Invoices(ctx, url.Values{"month": {M1}}); err != nil || len(inv) != 2 {
		t.Fatalf("admin's invoices of %s: %+v, %v", M1, inv, err)
	}
	if _, err := e.client("tenant1").CloseMonth(ctx, M1); !errors.As(err, &re) || re.Status != 403 {
		t.Fatalf("a tenant closed a month: %v", err)
	}
	csv, err := t1.StatementsCSV(ctx, "/invoices", url.Values{"month": {M1}})
	if err != nil || !strings.HasPrefix(string(csv), "month,tenant,currency,for_month,listing_id,listing,version,unit,quantity,amount_micros\n") ||
		!strings.HasSuffix(string(csv), M1+",tenant1,USD,,,,,total,,7201000\n") {
		t.Fatalf("CSV %q, %v", csv, err)
	}
	if _, err := e.pool.Exec(ctx, `update statement_lines set amount_micros = 0`); err == nil {
		t.Fatal("the database let a closed month's lines change")
	}
}

// checkInvoice fails t unless c's one invoice of month has lines want
// (in the API's order) and total.
func checkInvoice(t *testing.T, c *registryclient.Client, month string, want []registryapi.StatementLine, total int64) {
	t.Helper()
	inv, err := c.Invoices(context.Background(), url.Values{"month": {month}})
	if err != nil || len(inv) != 1 {
		t.Fatalf("invoices of %s: %+v, %v", month, inv, err)
	}
	if len(inv[0].Lines) != len(want) || inv[0].TotalMicros != total || !inv[0].Closed {
		t.Fatalf("invoice of %s: %+v, want lines %+v, total %d", month, inv[0], want, total)
	}
	for i, l := range inv[0].Lines {
		if l != want[i] {
			t.Errorf("invoice of %s, line %d: %+v, want %+v", month, i, l, want[i])
		}
	}
}
