package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/api"
)

// spendEvents counts tenant's spend.threshold_reached events.
func (e *env) spendEvents(t *testing.T, tenant string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `select count(*) from events where account_id = $1::uuid and type = $2`,
		e.users[tenant].ID, registryapi.EventSpendThreshold).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSpendLimits: a tenant's limits, who may see and set them, the alert
// once the spend crosses it (once a month, however often it is seen),
// and at the hard limit new load grants, attachments and renewals refused
// with 402 spend_limit while an admin's raise lets them through again.
func TestSpendLimits(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	e, ctx := p.env, context.Background()
	e.must(200, "isv1", "PATCH", "/listings/"+p.listing.ID, item{"price_per_load_micros": 1_000_000})
	path := "/accounts/tenant1/spend-limits"

	var L registryapi.SpendLimits
	e.must(200, "tenant1", "GET", path, nil).decode(t, &L)
	if L.Tenant != "tenant1" || L.Month != time.Now().UTC().Format("2006-01") || len(L.Items) != 0 {
		t.Fatalf("no limits yet: %+v", L)
	}
	// Not yours: one answer for another tenant's and for no tenant's.
	for _, c := range []struct {
		who, method, path string
		status            int
	}{{"tenant2", "GET", path, 404}, {"tenant2", "PUT", path + "/USD", 404}, {"isv1", "GET", path, 403},
		{"node1", "PUT", path + "/USD", 403}, {"admin", "GET", "/accounts/isv1/spend-limits", 404},
		{"admin", "GET", "/accounts/nobody/spend-limits", 404}, {"tenant1", "GET", "/accounts/tenant2/spend-limits", 404}} {
		r := e.do(c.who, c.method, c.path, item{"limit_micros": 1})
		if r.status != c.status {
			t.Errorf("%s %s %s: %d, want %d: %s", c.who, c.method, c.path, r.status, c.status, r.body)
		}
	}
	if r := e.do("tenant2", "GET", path, nil); !strings.Contains(string(r.body), "no such tenant account of yours") {
		t.Errorf("not yours: %s", r.body)
	}
	for _, c := range []struct {
		path  string
		body  item
		field string
	}{{path + "/usd", item{"limit_micros": 1}, "currency"}, {path + "/USD", item{"limit_micros": -1}, "limit_micros"},
		{path + "/USD", item{"alert_micros": 3, "limit_micros": 2}, "alert_micros"},
		{path + "/USD", item{"alert_micros": registryapi.MaxSpendMicros + 1}, "alert_micros"},
		{path + "/USD", item{"limit": 2}, "limit"}} {
		var eb registryapi.ErrorBody
		e.must(422, "tenant1", "PUT", c.path, c.body).decode(t, &eb)
		if eb.Error.Field != c.field {
			t.Errorf("PUT %s %v: field %q, want %q", c.path, c.body, eb.Error.Field, c.field)
		}
	}

	var W registryapi.Webhook
	e.must(201, "tenant1", "POST", "/webhooks", item{"url": "https://hooks.example.com/spend",
		"events": []string{registryapi.EventSpendThreshold}}).decode(t, &W)
	c1 := e.client("tenant1")
	got, err := c1.SetSpendLimit(ctx, "tenant1", "USD", registryapi.SpendLimitUpdate{AlertMicros: i64(1_500_000), LimitMicros: i64(2_000_000)})
	if err != nil || got.SpendMicros != 0 || *got.LimitMicros != 2_000_000 || got.Reached {
		t.Fatalf("set: %+v %v", got, err)
	}
	// An attachment held from before the limit is reached (its time is
	// free: no attached-hour price).
	held := p.attach("tenant1", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"})

	node := p.nodes["node1"]
	load := func(status int) resp {
		t.Helper()
		r := e.must(status, "tenant1", "POST", "/load-grants", item{"node_id": node.ID, "repository": "isv1/mnist", "digest": p.one})
		if status == 201 {
			var G registryapi.Grant
			r.decode(t, &G)
			e.must(200, "node1", "POST", "/usage", item{"node_id": node.ID, "records": []item{{"report_id": uniq("r"),
				"tenant_id": e.users["tenant1"].ID, "grant_id": G.ID, "event": "load", "slot": 0, "digest": p.one}}})
		}
		return r
	}
	load(201)
	if n := e.spendEvents(t, "tenant1"); n != 0 {
		t.Fatalf("%d alerts below the threshold", n)
	}
	load(201) // 2 USD: past the alert, at the limit
	if n := e.spendEvents(t, "tenant1"); n != 1 {
		t.Fatalf("%d alerts once the usage report crossed the threshold, want 1", n)
	}
	var eb registryapi.ErrorBody
	load(402).decode(t, &eb)
	if eb.Error.Code != registryapi.CodeSpendLimit || !strings.Contains(eb.Error.Message, "spent 2.000000 USD of its spend limit of 2.000000 USD") {
		t.Errorf("refused grant: %+v", eb.Error)
	}
	_, err = c1.LoadGrant(ctx, registryapi.GrantRequest{NodeID: node.ID, Repository: "isv1/mnist", Digest: p.one})
	if !errors.Is(err, registryclient.ErrSpendLimit) || errors.Is(err, registryclient.ErrDenied) {
		t.Errorf("the client's error %v is not ErrSpendLimit alone", err)
	}
	e.must(402, "tenant1", "POST", "/attachments", poolapi.AttachRequest{Listing: "isv1/mnist", Version: "1"}).decode(t, &eb)
	if eb.Error.Code != registryapi.CodeSpendLimit {
		t.Errorf("refused attachment: %+v", eb.Error)
	}
	e.must(402, "tenant1", "POST", "/attachments/"+held.ID+"/renew", nil).decode(t, &eb)
	if !strings.Contains(eb.Error.Message, "is not renewed and ends when its lease runs out") {
		t.Errorf("refused renewal: %+v", eb.Error)
	}
	if a := p.get("tenant1", held.ID); !a.State.Live() {
		t.Errorf("the held attachment was ended: %+v", a)
	}
	// Another tenant is not held by tenant1's limit.
	e.must(201, "tenant2", "POST", "/load-grants", item{"node_id": node.ID, "repository": "isv1/mnist", "digest": p.one})

	e.must(200, "tenant1", "GET", path, nil).decode(t, &L)
	if len(L.Items) != 1 || L.Items[0].SpendMicros != 2_000_000 || !L.Items[0].Reached {
		t.Errorf("at the limit: %+v", L)
	}
	// An admin raises the limit: loads go on; the month's alert is not
	// written again.
	e.must(200, "admin", "PUT", path+"/USD", item{"alert_micros": 1_500_000, "limit_micros": 10_000_000})
	load(201)
	e.must(200, "tenant1", "POST", "/attachments/"+held.ID+"/renew", nil)
	if n := e.spendEvents(t, "tenant1"); n != 1 {
		t.Errorf("%d alerts in the month, want 1", n)
	}
	var ev struct {
		Data       map[string]any
		DedupeKey  string
		Deliveries int
	}
	if err := e.pool.QueryRow(ctx, `select data, dedupe_key, (select count(*) from webhook_deliveries d where d.event_id = ev.id)
		from events ev where account_id = $1::uuid and type = $2`, e.users["tenant1"].ID, registryapi.EventSpendThreshold).
		Scan(&ev.Data, &ev.DedupeKey, &ev.Deliveries); err != nil {
		t.Fatal(err)
	}
	if ev.Data["month"] != L.Month || ev.Data["currency"] != "USD" || ev.Data["spend_micros"] != float64(2_000_000) ||
		!strings.HasSuffix(ev.DedupeKey, ":USD:"+L.Month) || ev.Deliveries != 1 {
		t.Errorf("the alert: %+v", ev)
	}
	var ns registryapi.Items[registryapi.Notification]
	e.must(200, "tenant1", "GET", "/notifications", nil).decode(t, &ns)
	if len(ns.Items) != 1 || ns.Items[0].Type != registryapi.EventSpendThreshold {
		t.Errorf("notifications: %+v", ns.Items)
	}

	// Both null remove the limits; the spend is still shown.
	got, err = c1.SetSpendLimit(ctx, "tenant1", "USD", registryapi.SpendLimitUpdate{})
	if err != nil || got.LimitMicros != nil || got.SpendMicros != 3_000_000 {
		t.Errorf("removed: %+v %v", got, err)
	}
	if L, err = c1.SpendLimits(ctx, "tenant1"); err != nil || len(L.Items) != 1 || L.Items[0].LimitMicros != nil || L.Items[0].SpendMicros != 3_000_000 {
		t.Errorf("after removal: %+v %v", L, err)
	}
}

// TestTrialPriced: a listing's free trial by hand: each tenant's first
// hours of busy and attached time, over months, are a trial_hour line of
// amount 0, the ISV's gross excludes them, the spend counts only what is
// billed, and the trial cannot change once used.
func TestTrialPriced(t *testing.T) {
	e := newEnvWith(t, api.Config{PlatformFeeBasisPoints: 1000})
	ctx := context.Background()
	d := e.pushManifest("isv1/dnn", "v1")
	var L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "dnn", "repository": "isv1/dnn", "trial_hours": 2,
		"price_per_hour_micros": 3_000_000, "price_per_attached_hour_micros": 1_000_000}).decode(t, &L)
	if L.TrialHours != 2 {
		t.Fatalf("trial_hours %d", L.TrialHours)
	}
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": "1", "digest": d})
	e.must(422, "isv1", "PATCH", "/listings/"+L.ID, item{"trial_hours": registryapi.MaxTrialHours + 1})
	last, this := monthsAgo(1), monthsAgo(0)
	// tenant1: 3 h busy last month, 2 of them free; 1 h attached this
	// month, all billed. tenant2: 1 h attached this month, free.
	e.record(t, record{tenant: "tenant1", listing: L.ID, digest: d, event: "busy", busyNs: int64(3 * time.Hour),
		start: at(last.Add(time.Hour))})
	e.record(t, record{tenant: "tenant1", listing: L.ID, digest: d, event: "attach", start: at(this), end: at(this.Add(time.Hour))})
	e.record(t, record{tenant: "tenant2", listing: L.ID, digest: d, event: "attach", start: at(this), end: at(this.Add(time.Hour))})
	e.must(422, "isv1", "PATCH", "/listings/"+L.ID, item{"trial_hours": 5})
	e.must(200, "isv1", "PATCH", "/listings/"+L.ID, item{"trial_hours": 2}) // unchanged is no change

	h := time.Hour.Nanoseconds()
	lines := func(who string, month time.Time) map[string]registryapi.StatementLine {
		t.Helper()
		invs, err := e.client(who).Invoices(ctx, url.Values{"month": {month.Format("2006-01")}})
		if err != nil || len(invs) != 1 {
			t.Fatalf("%s's invoices of %s: %+v %v", who, month.Format("2006-01"), invs, err)
		}
		out := map[string]registryapi.StatementLine{}
		for _, l := range invs[0].Lines {
			if l.ForMonth == month.Format("2006-01") { // not the adjustments of a preview
				out[l.Unit] = l
			}
		}
		return out
	}
	ls := lines("tenant1", last)
	if l := ls[registryapi.UnitLoadedHour]; l.Quantity != h || l.AmountMicros != 3_000_000 {
		t.Errorf("last month's billed hour: %+v", l)
	}
	if l := ls[registryapi.UnitTrialHour]; l.Quantity != 2*h || l.AmountMicros != 0 || l.Version != "1" {
		t.Errorf("last month's trial: %+v", l)
	}
	if ls = lines("tenant1", this); len(ls) != 1 || ls[registryapi.UnitAttachedHour].AmountMicros != 1_000_000 {
		t.Errorf("this month, trial used up: %+v", ls)
	}
	if ls = lines("tenant2", this); len(ls) != 1 || ls[registryapi.UnitTrialHour].Quantity != h {
		t.Errorf("tenant2's trial: %+v", ls)
	}
	ss, err := e.client("isv1").RevenueStatements(ctx, url.Values{"month": {last.Format("2006-01")}})
	if err != nil || len(ss) != 1 || ss[0].GrossMicros != 3_000_000 || ss[0].FeeMicros != 300_000 {
		t.Errorf("revenue of last month: %+v %v", ss, err)
	}
	// The spend is the month's invoice: tenant1's hour attached, and
	// nothing of tenant2's free one.
	for who, want := range map[string]int64{"tenant1": 1_000_000, "tenant2": 0} {
		sl, err := e.client(who).SpendLimits(ctx, who)
		if err != nil || len(sl.Items) != 1 || sl.Items[0].SpendMicros != want || sl.Items[0].Currency != "USD" {
			t.Errorf("%s's spend: %+v %v, want %d", who, sl, err, want)
		}
	}
}

// TestSpendOpenAPI: the operations the spend limit refuses document 402.
func TestSpendOpenAPI(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct{ Responses map[string]any }
	}
	if err := json.Unmarshal(api.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			_, has := op.Responses["402"]
			want := map[string]bool{"post /load-grants": true, "post /attachments": true, "post /attachments/{id}/renew": true}[method+" "+path]
			if has != want {
				t.Errorf("%s %s: 402 documented %v, want %v", method, path, has, want)
			}
		}
	}
}
