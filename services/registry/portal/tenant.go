package portal

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// nodeHeartbeat is faasd's heartbeat period (services/agent/server,
// Config.Heartbeat's default; faasd has no flag for it). A node silent for
// staleAfter is flagged stale.
const (
	nodeHeartbeat = 30 * time.Second
	staleAfter    = 3 * nodeHeartbeat
)

type loadRow struct {
	registryapi.Load
	Stale bool
}

type usageRow struct {
	registryapi.UsageSummary
	BusyHours string
}

type myPage struct {
	Entitlements []registryapi.Entitlement
	Loads        []loadRow
	Usage        []usageRow
	Totals       []string // the cost to date, one entry a currency
	Month        string   // the month running, YYYY-MM (UTC)
	Spend        []spendRow
}

func (myPage) title() string { return "My accelerators" }
func (myPage) nav() string   { return "my" }

// hours formats nanoseconds as hours with two decimals.
func hours(ns int64) string { return fmt.Sprintf("%.2f", float64(ns)/float64(time.Hour)) }

// totals sums the usage's cost by currency, formatted, in currency order.
func totals(rows []registryapi.UsageSummary) []string {
	sum := map[string]int64{}
	for _, r := range rows {
		sum[r.Currency] += r.TotalMicros
	}
	out := make([]string, 0, len(sum))
	for c, v := range sum {
		out = append(out, price(c, v))
	}
	sort.Strings(out)
	return out
}

func (p *Portal) myAccelerators(w http.ResponseWriter, r *http.Request) {
	ctx, api := r.Context(), p.apiAs(accountOf(r))
	var pg myPage
	ents, err := api.Entitlements(ctx, url.Values{"active": {"true"}, "limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Entitlements = ents.Items
	loads, err := api.Loads(ctx)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	now := time.Now()
	for _, l := range loads {
		pg.Loads = append(pg.Loads, loadRow{Load: l, Stale: l.LastHeartbeatAt == nil || now.Sub(*l.LastHeartbeatAt) > staleAfter})
	}
	usage, err := api.UsageSummary(ctx, nil)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, u := range usage.Items {
		pg.Usage = append(pg.Usage, usageRow{UsageSummary: u, BusyHours: hours(u.BusyNs)})
	}
	pg.Totals = totals(usage.Items)
	spend, err := api.SpendLimits(ctx, accountOf(r).Name)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Month, pg.Spend = spend.Month, spendRows(spend)
	p.render(w, r, http.StatusOK, pageMy, pg)
}

type unsubscribePage struct{ Entitlement registryapi.Entitlement }

func (unsubscribePage) title() string { return "End subscription" }
func (unsubscribePage) nav() string   { return "my" }

// ownEntitlement finds the caller's active entitlement id, or answers 404.
func (p *Portal) ownEntitlement(w http.ResponseWriter, r *http.Request) (registryapi.Entitlement, bool) {
	id := r.PathValue("id")
	ents, err := p.apiAs(accountOf(r)).Entitlements(r.Context(), url.Values{"active": {"true"}, "limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return registryapi.Entitlement{}, false
	}
	for _, e := range ents.Items {
		if e.ID == id && e.AccountID == accountOf(r).ID {
			return e, true
		}
	}
	p.render(w, r, http.StatusNotFound, pageError, errorPage{Title: "Not found", Message: "You have no such subscription."})
	return registryapi.Entitlement{}, false
}

// confirmUnsubscribe asks before ending a subscription, with or without
// JavaScript.
func (p *Portal) confirmUnsubscribe(w http.ResponseWriter, r *http.Request) {
	if e, ok := p.ownEntitlement(w, r); ok {
		p.render(w, r, http.StatusOK, pageUnsubscribe, unsubscribePage{Entitlement: e})
	}
}

func (p *Portal) unsubscribe(w http.ResponseWriter, r *http.Request) {
	err := p.apiAs(accountOf(r)).RevokeEntitlement(r.Context(), r.PathValue("id"))
	if errors.Is(err, registryclient.ErrNotFound) {
		p.render(w, r, http.StatusNotFound, pageError, errorPage{Title: "Not found", Message: "You have no such subscription."})
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/my", "unsubscribed")
}
