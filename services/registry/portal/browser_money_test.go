package portal_test

import (
	"context"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// priceStep is a listing's price from a moment on, in micro-units.
type priceStep struct {
	from          time.Time
	load, perHour int64
}

// usage is a tenant's use as its node reports it: a load at a moment, or
// busy time ending at one.
type usage struct {
	load bool
	end  time.Time
	busy time.Duration
}

// bill recomputes, from raw usage and prices alone, what [from, to) costs:
// loads at the price in force when they happened, busy time integrated
// over the prices in force, clipped to the window, and the time's total
// rounded down once per line, as statements round.
func bill(steps []priceStep, uses []usage, from, to time.Time) int64 {
	priceAt := func(t time.Time) priceStep {
		p := steps[0]
		for _, s := range steps {
			if !t.Before(s.from) {
				p = s
			}
		}
		return p
	}
	var loads int64
	timeValue := new(big.Int) // ns × micro-units per hour: past int64 within the hour
	for _, u := range uses {
		if u.load {
			if !u.end.Before(from) && u.end.Before(to) {
				loads += priceAt(u.end).load
			}
			continue
		}
		for t := u.end.Add(-u.busy); t.Before(u.end); {
			next := u.end
			for _, s := range steps {
				if s.from.After(t) && s.from.Before(next) {
					next = s.from
				}
			}
			a, b := maxTime(t, from), minTime(next, to)
			if a.Before(b) {
				timeValue.Add(timeValue, new(big.Int).Mul(big.NewInt(int64(b.Sub(a))), big.NewInt(priceAt(t).perHour)))
			}
			t = next
		}
	}
	return loads + timeValue.Div(timeValue, big.NewInt(int64(time.Hour))).Int64()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// TestBrowserMonthCrossingPrices: a tenant's usage crosses a price change
// and a month's end; the node reports it through the API. The operator
// sees the month's invoice in the portal, closes the month there, and the
// tenant's invoice and the ISV's revenue statement, as Chromium shows
// them, equal what bill recomputes from the raw usage and prices.
func TestBrowserMonthCrossingPrices(t *testing.T) {
	r := newRig(t)
	for name, role := range map[string]auth.Role{"acme": auth.RoleISV, "alice": auth.RoleTenant, "root": auth.RoleAdmin} {
		r.user(name, role)
	}
	listing := r.listing("acme", "Fast AES", "AES at line rate.", true)
	digest := r.version("acme", listing, "acme/fast-aes", "1.0.0")
	r.api("alice", http.MethodPost, "/listings/"+listing+"/subscribe", nil, nil)
	nodeAcct, nodeID := r.node("n1")

	y, m, _ := time.Now().UTC().Date()
	month := time.Date(y, m-2, 1, 0, 0, 0, 0, time.UTC) // ended, and so has the one after it
	next := month.AddDate(0, 1, 0)
	change := month.AddDate(0, 0, 10)
	steps := []priceStep{{month.AddDate(0, 0, -1), 500_000, 1_000_000}, {change, 500_000, 3_000_000}}
	for _, s := range steps {
		r.pastPrice(listing, s.from, s.load, s.perHour)
	}
	uses := []usage{
		{load: true, end: month.AddDate(0, 0, 2)},
		{end: change.Add(2 * time.Hour), busy: 3 * time.Hour}, // 1 h before the change, 2 h after
		{end: next.Add(time.Hour), busy: 2 * time.Hour},       // 1 h in each month
	}
	var g, me struct{ ID string }
	r.api("alice", http.MethodPost, "/load-grants", map[string]string{"node_id": nodeID, "repository": "acme/fast-aes", "digest": digest}, &g)
	r.api("alice", http.MethodGet, "/me", nil, &me)
	var recs []map[string]any
	for i, u := range uses {
		rec := map[string]any{"report_id": "r" + string(rune('a'+i)), "tenant_id": me.ID, "grant_id": g.ID, "digest": digest}
		if u.load {
			rec["event"], rec["started_at"] = "load", u.end
		} else {
			rec["event"], rec["ended_at"], rec["busy_ns"] = "busy", u.end, u.busy.Nanoseconds()
		}
		recs = append(recs, rec)
	}
	r.api(nodeAcct, http.MethodPost, "/usage", map[string]any{"node_id": nodeID, "records": recs}, nil)

	want, wantNext := bill(steps, uses, month, next), bill(steps, uses, next, next.AddDate(0, 1, 0))
	// By hand: 0.50 for the load, 1 h at 1.00 and 2 h at 3.00 across the
	// change, 1 h at 3.00 before the month's end; 1 h at 3.00 after it.
	if want != 10_500_000 || wantNext != 3_000_000 {
		t.Fatalf("bill recomputes %d and %d, by hand 10500000 and 3000000", want, wantNext)
	}
	name, nextName := month.Format("2006-01"), next.Format("2006-01")
	fee := want * 2000 / 10000 // the registry's default platform fee, 20%

	c := newChrome(t)
	signInChrome(c, r.url, "root")
	c.run("operator's invoices", chromedp.Navigate(r.url+"/admin/invoices?month="+name), chromedp.WaitVisible("article.statement", chromedp.ByQuery))
	if got := c.text("article.statement"); !strings.Contains(got, "Preview") || !strings.Contains(got, "alice") ||
		!strings.Contains(got, "USD "+usd(want)) {
		t.Fatalf("operator's preview of %s: %q, want alice's invoice of USD %s", name, got, usd(want))
	}
	c.shot("47-admin-invoices-preview")
	acceptDialogs(c)
	c.follow("close the month", chromedp.Click(`form[action="/admin/months/`+name+`/close"] button`, chromedp.ByQuery), ".flash")
	if got := c.text("main"); !strings.Contains(got, "Month closed") || !strings.Contains(got, "final") || strings.Contains(got, "Preview") {
		t.Fatalf("after closing %s: %q", name, got)
	}
	if n, err := r.as("root").CloseMonth(context.Background(), nextName); err != nil || n.Month != nextName {
		t.Fatalf("close %s: %+v %v", nextName, n, err)
	}
	c.shot("48-admin-invoices-closed")
	c.clean("operator's statements")

	for _, v := range []struct {
		user, path, month string
		want              []string
	}{
		{"alice", "/my/invoices", name, []string{"Closed", "Fast AES", "1.0.0", "USD " + usd(want)}},
		{"alice", "/my/invoices", nextName, []string{"Closed", "USD " + usd(wantNext)}},
		{"acme", "/isv/statements", name, []string{"Closed", "Gross", "USD " + usd(want), "Platform fee (20%)", "USD −" + usd(fee), "Net", "USD " + usd(want-fee)}},
	} {
		c2 := newChrome(t)
		signInChrome(c2, r.url, v.user)
		c2.run(v.user+"'s "+v.path, chromedp.Navigate(r.url+v.path+"?month="+v.month), chromedp.WaitVisible("article.statement tfoot", chromedp.ByQuery))
		got := c2.text("article.statement")
		for _, w := range v.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s's %s of %s lacks %q: %q", v.user, v.path, v.month, w, got)
			}
		}
		c2.shot("49-" + v.user + "-" + v.month)
		c2.clean(v.path)
	}
}

// usd writes micro-units as the statements' amounts, to the cent when
// exact (as every amount of this test is).
func usd(micros int64) string { return strings.TrimSuffix(decimalMicros(micros), "0000") }

func decimalMicros(m int64) string {
	s := []byte{}
	for i := 0; i < 6 || m > 0; i++ {
		if i == 6 {
			s = append([]byte{'.'}, s...)
		}
		s = append([]byte{byte('0' + m%10)}, s...)
		m /= 10
	}
	if s[0] == '.' {
		s = append([]byte{'0'}, s...)
	}
	return string(s)
}

// acceptDialogs answers yes to the page's confirmation dialogs, as a
// person who means the click would.
func acceptDialogs(c *chrome) {
	chromedp.ListenTarget(c.ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go chromedp.Run(c.ctx, page.HandleJavaScriptDialog(true))
		}
	})
}

// pastPrice writes a listing's price effective at a past moment: history
// as it would have been written then, which the database refuses to write
// now (hence triggers off for this one transaction).
func (r *rig) pastPrice(listing string, at time.Time, load, perHour int64) {
	r.t.Helper()
	ctx := context.Background()
	tx, err := r.srv.Pool().Begin(ctx)
	if err != nil {
		r.t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `set local session_replication_role = replica`); err != nil {
		r.t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros,
		per_attached_hour_micros) values ($1::uuid, $2, $3, $4, 0)`, listing, at, load, perHour); err != nil {
		r.t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		r.t.Fatal(err)
	}
}
