package portal

import (
	"encoding/csv"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// isvAudit is an ISV's audit: what the API shows it of its listings, keys
// and own actions.
var isvAudit = auditView{tabs: isvTabs, tab: "audit", base: "/isv/audit", nav: "isv",
	heading: "Audit", intro: "What happened to your listings and signing keys, and everything your account did, newest first."}

func isvTabs(cur string) []tab {
	return tabsOf(cur, [2]string{"/isv", "Dashboard"}, [2]string{"/isv/usage", "Subscribers and usage"},
		[2]string{"/isv/statements", "Revenue statements"}, [2]string{"/isv/audit", "Audit"})
}

// maxUsageDays bounds the range of the usage page and its export.
const maxUsageDays = 366

// usageQuery is the range and listing the usage page and its export show.
type usageQuery struct {
	From, To string // YYYY-MM-DD, inclusive
	Listing  string
	days     []string
	api      url.Values
}

// parseUsageQuery reads from, to (dates, default the last 30 days) and
// listing; the error names the field at fault.
func parseUsageQuery(in url.Values, now time.Time) (usageQuery, error) {
	today := now.UTC().Truncate(24 * time.Hour)
	from, to := today.AddDate(0, 0, -29), today
	for _, f := range []struct {
		name string
		t    *time.Time
	}{{"from", &from}, {"to", &to}} {
		if s := in.Get(f.name); s != "" {
			t, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return usageQuery{}, fmt.Errorf("%s: want a date like 2030-01-31", f.name)
			}
			*f.t = t
		}
	}
	if to.Before(from) {
		return usageQuery{}, fmt.Errorf("to: must not be before from")
	}
	if to.Sub(from) >= maxUsageDays*24*time.Hour {
		return usageQuery{}, fmt.Errorf("to: at most %d days after from", maxUsageDays)
	}
	q := usageQuery{From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Listing: in.Get("listing"),
		api: url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.AddDate(0, 0, 1).Format(time.RFC3339)}}}
	if q.Listing != "" {
		q.api.Set("listing_id", q.Listing)
	}
	for d := from; !d.After(to); d = d.AddDate(0, 0, 1) {
		q.days = append(q.days, d.Format(time.DateOnly))
	}
	return q, nil
}

type subscriberRow struct {
	registryapi.Entitlement
	Active bool
}

type isvUsagePage struct {
	Tabs        []tab
	Query       usageQuery
	Error       string
	Listings    []registryapi.Listing
	Subscribers []subscriberRow
	Daily       []usageRow
	ByTenant    []usageRow
	Charts      []barChart
	Totals      []string
	// CSV is the export's address; a template.URL, since html/template
	// would escape the "=" and "&" of a query written into href after "?".
	CSV template.URL
}

func (isvUsagePage) title() string { return "Subscribers and usage" }
func (isvUsagePage) nav() string   { return "isv" }

func (p *Portal) isvUsage(w http.ResponseWriter, r *http.Request) {
	ctx, acct := r.Context(), accountOf(r)
	pg := isvUsagePage{Tabs: isvTabs("usage")}
	var err error
	if pg.Listings, err = p.ownListings(r); err != nil {
		p.fail(w, r, err)
		return
	}
	q, qerr := parseUsageQuery(r.URL.Query(), time.Now())
	if qerr != nil {
		pg.Error = qerr.Error()
		pg.Query, _ = parseUsageQuery(url.Values{"listing": {r.URL.Query().Get("listing")}}, time.Now())
		p.render(w, r, http.StatusUnprocessableEntity, pageISVUsage, pg)
		return
	}
	pg.Query = q
	mine := map[string]bool{}
	for _, l := range pg.Listings {
		mine[l.ID] = true
	}
	ents, err := p.apiAs(acct).Entitlements(ctx, url.Values{"limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, e := range ents.Items {
		// The API shows an ISV also its own entitlements to others' listings.
		if mine[e.ListingID] && e.AccountID != acct.ID && (q.Listing == "" || e.ListingID == q.Listing) {
			pg.Subscribers = append(pg.Subscribers, subscriberRow{Entitlement: e, Active: e.RevokedAt == nil})
		}
	}
	daily, err := p.usage(r, q, true)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	byTenant, err := p.usage(r, q, false)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, u := range daily {
		pg.Daily = append(pg.Daily, usageRow{UsageSummary: u, BusyHours: hours(u.BusyNs)})
	}
	for _, u := range byTenant {
		pg.ByTenant = append(pg.ByTenant, usageRow{UsageSummary: u, BusyHours: hours(u.BusyNs)})
	}
	pg.Totals = totals(byTenant)
	pg.Charts = revenueCharts(q.days, daily)
	csvQ := url.Values{"from": {q.From}, "to": {q.To}}
	if q.Listing != "" {
		csvQ.Set("listing", q.Listing)
	}
	pg.CSV = template.URL("/isv/usage.csv?" + csvQ.Encode()) // the values are encoded
	p.render(w, r, http.StatusOK, pageISVUsage, pg)
}

func (p *Portal) usage(r *http.Request, q usageQuery, perDay bool) ([]registryapi.UsageSummary, error) {
	v := url.Values{}
	for k, x := range q.api {
		v[k] = x
	}
	if perDay {
		v.Set("by", "day")
	}
	res, err := p.apiAs(accountOf(r)).UsageSummary(r.Context(), v)
	return res.Items, err
}

// revenueCharts draws the revenue per day, one chart a currency.
func revenueCharts(days []string, rows []registryapi.UsageSummary) []barChart {
	byCur := map[string]map[string]int64{}
	loads := map[string]map[string]int64{}
	for _, u := range rows {
		if byCur[u.Currency] == nil {
			byCur[u.Currency], loads[u.Currency] = map[string]int64{}, map[string]int64{}
		}
		byCur[u.Currency][u.Day] += u.TotalMicros
		loads[u.Currency][u.Day] += u.Loads
	}
	curs := make([]string, 0, len(byCur))
	for c := range byCur {
		curs = append(curs, c)
	}
	sort.Strings(curs)
	var out []barChart
	for _, c := range curs {
		labels := map[string]string{}
		for _, d := range days {
			labels[d] = fmt.Sprintf("%s: %s, %d loads", d, price(c, byCur[c][d]), loads[c][d])
		}
		out = append(out, newBarChart("revenue-"+c, "Revenue per day ("+c+")", days, byCur[c], labels,
			func(v int64) string { return price(c, v) }))
	}
	return out
}

// csvSafe defuses a cell that a spreadsheet would run as a formula.
func csvSafe(s string) string {
	if s != "" && slices.Contains([]byte("=+-@\t\r"), s[0]) {
		return "'" + s
	}
	return s
}

func (p *Portal) isvUsageCSV(w http.ResponseWriter, r *http.Request) {
	q, err := parseUsageQuery(r.URL.Query(), time.Now())
	if err != nil {
		p.render(w, r, http.StatusUnprocessableEntity, pageError, errorPage{Title: "Cannot export", Message: err.Error()})
		return
	}
	rows, err := p.usage(r, q, true)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/csv; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="usage-%s-%s.csv"`, q.From, q.To))
	h.Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	_ = cw.Write([]string{"day", "listing_id", "listing", "tenant", "loads", "clears", "busy_hours", "currency",
		"price_per_hour", "price_per_load", "revenue"})
	money := func(v int64) string { return fmt.Sprintf("%d.%06d", v/1_000_000, v%1_000_000) }
	for _, u := range rows {
		_ = cw.Write([]string{u.Day, u.ListingID, csvSafe(u.ListingName), csvSafe(u.Tenant), strconv.FormatInt(u.Loads, 10),
			strconv.FormatInt(u.Clears, 10), fmt.Sprintf("%.4f", float64(u.BusyNs)/float64(time.Hour)), csvSafe(u.Currency),
			money(u.PricePerHourMicros), money(u.PricePerLoadMicros), money(u.TotalMicros)})
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		p.log.WarnContext(r.Context(), "portal: usage export", "err", err)
	}
}
