package portal

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// statementKind is a tenant's invoices or an ISV's revenue statements, or
// the operator's view of everyone's: the pages show one month's, as the
// API gives them, ready to print.
type statementKind struct {
	heading, base, api string
	tab                string // the current tab, for tabs
	tabs               func(string) []tab
	nav                string
	operator           bool // everyone's, with the month's close
}

var (
	invoicesKind = statementKind{heading: "Invoice", base: "/my/invoices", api: "/invoices",
		tabs: func(string) []tab { return nil }, nav: "my"}
	revenueKind = statementKind{heading: "Revenue statement", base: "/isv/statements", api: "/revenue-statements",
		tab: "statements", tabs: isvTabs, nav: "isv"}
	adminInvoicesKind = statementKind{heading: "Invoice", base: "/admin/invoices", api: "/invoices",
		tab: "invoices", tabs: adminTabs, nav: "admin", operator: true}
	adminRevenueKind = statementKind{heading: "Revenue statement", base: "/admin/statements", api: "/revenue-statements",
		tab: "statements", tabs: adminTabs, nav: "admin", operator: true}
)

// statementPage is one month's documents of the signed-in account.
type statementPage struct {
	kind                 statementKind
	Tabs                 []tab
	Heading, Base, Month string
	Prev, Next           string // neighbouring months
	Docs                 []statementDoc
	Error                string
	CSV                  string // query of the export
	// Closable: the operator may close this month (it has ended and
	// nothing shown says it is closed); the API refuses what is not
	// closable after all (a month before it still open, one closed).
	Closable bool
}

func (pg statementPage) title() string { return pg.Heading + "s " + pg.Month }
func (pg statementPage) nav() string   { return pg.kind.nav }

// statementDoc is an invoice or a revenue statement.
type statementDoc struct {
	Party, Currency string
	Closed          bool
	ClosedAt        *time.Time
	Lines           []statementLineView
	Totals          [][2]string // label, amount
}

type statementLineView struct {
	registryapi.StatementLine
	Adjustment     bool
	Quantity, Unit string
	Amount         string
}

// amount writes micro-units in full: an invoice shows what it bills to the
// micro-unit.
func amount(currency string, micros int64) string { return currency + " " + signed(micros) }

// signed is decimal for amounts that a correction may make negative.
func signed(micros int64) string {
	if micros < 0 {
		return "−" + decimal(-micros)
	}
	return decimal(micros)
}

// nsPerMicroHour shows time to the micro-hour (3.6 ms), as prices are
// per hour in micro-units.
const nsPerMicroHour = 3_600_000

func lineView(month, currency string, l registryapi.StatementLine) statementLineView {
	v := statementLineView{StatementLine: l, Adjustment: l.ForMonth != month, Amount: amount(currency, l.AmountMicros)}
	switch l.Unit {
	case registryapi.UnitLoad:
		v.Unit, v.Quantity = "loads", strconv.FormatInt(l.Quantity, 10)
	case registryapi.UnitLoadedHour:
		v.Unit, v.Quantity = "hours busy", signed(l.Quantity/nsPerMicroHour)
	case registryapi.UnitTrialHour:
		v.Unit, v.Quantity = "hours free trial", signed(l.Quantity/nsPerMicroHour)
	default:
		v.Unit, v.Quantity = "hours attached", signed(l.Quantity/nsPerMicroHour)
	}
	return v
}

// statements shows the signed-in account's documents of ?month=.
func (p *Portal) statements(k statementKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pg := statementPage{kind: k, Tabs: k.tabs(k.tab), Heading: k.heading, Base: k.base}
		month, err := pageMonth(r.URL.Query().Get("month"))
		if err != nil {
			pg.Error, month = err.Error(), monthOf(time.Now())
		}
		pg.Month, pg.Prev, pg.Next = month.Format("2006-01"), month.AddDate(0, -1, 0).Format("2006-01"), month.AddDate(0, 1, 0).Format("2006-01")
		if pg.Error != "" {
			p.render(w, r, http.StatusUnprocessableEntity, pageStatements, pg)
			return
		}
		api, q := p.apiAs(accountOf(r)), url.Values{"month": {pg.Month}}
		if k.api == invoicesKind.api {
			invs, err := api.Invoices(r.Context(), q)
			if err != nil {
				p.fail(w, r, err)
				return
			}
			for _, inv := range invs {
				pg.Docs = append(pg.Docs, doc(pg.Month, inv.Tenant, inv.Currency, inv.Closed, inv.ClosedAt, inv.Lines,
					[][2]string{{"Total", amount(inv.Currency, inv.TotalMicros)}}))
			}
		} else {
			ss, err := api.RevenueStatements(r.Context(), q)
			if err != nil {
				p.fail(w, r, err)
				return
			}
			for _, s := range ss {
				pg.Docs = append(pg.Docs, doc(pg.Month, s.ISV, s.Currency, s.Closed, s.ClosedAt, s.Lines, [][2]string{
					{"Gross", amount(s.Currency, s.GrossMicros)},
					{"Platform fee (" + decimalPercent(s.FeeBasisPoints) + ")", amount(s.Currency, -s.FeeMicros)},
					{"Net", amount(s.Currency, s.NetMicros)}}))
			}
		}
		pg.Closable = k.operator && month.Before(monthOf(time.Now())) && !slices.ContainsFunc(pg.Docs, func(d statementDoc) bool { return d.Closed })
		p.render(w, r, http.StatusOK, pageStatements, pg)
	}
}

// closeMonth closes the month of the path for everyone (operators), and
// shows its invoices, final.
func (p *Portal) closeMonth(w http.ResponseWriter, r *http.Request) {
	month, err := pageMonth(r.PathValue("month"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	if _, err := p.apiAs(accountOf(r)).CloseMonth(r.Context(), month.Format("2006-01")); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, adminInvoicesKind.base+"?month="+month.Format("2006-01"), "month-closed")
}

func doc(month, party, currency string, closed bool, closedAt *time.Time, lines []registryapi.StatementLine, totals [][2]string) statementDoc {
	d := statementDoc{Party: party, Currency: currency, Closed: closed, ClosedAt: closedAt, Totals: totals}
	for _, l := range lines {
		d.Lines = append(d.Lines, lineView(month, currency, l))
	}
	return d
}

// decimalPercent writes basis points as a percentage: 1250 is "12.5%".
func decimalPercent(bp int) string {
	return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) + "%"
}

// statementsCSV downloads the month's documents as the API writes them.
func (p *Portal) statementsCSV(k statementKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		month, err := pageMonth(r.URL.Query().Get("month"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnprocessableEntity)
			return
		}
		b, err := p.apiAs(accountOf(r)).StatementsCSV(r.Context(), k.api, url.Values{"month": {month.Format("2006-01")}})
		if err != nil {
			p.fail(w, r, err)
			return
		}
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		w.Header().Set("Content-Disposition", `attachment; filename="`+k.api[1:]+"-"+month.Format("2006-01")+`.csv"`)
		_, _ = w.Write(b)
	}
}

func monthOf(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
}

// pageMonth reads a month of the query; empty is the month running.
func pageMonth(s string) (time.Time, error) {
	if s == "" {
		return monthOf(time.Now()), nil
	}
	t, err := time.Parse("2006-01", s)
	if err != nil || t.Year() < 2000 {
		return time.Time{}, errMonth
	}
	return t, nil
}

var errMonth = errors.New("month: want a month like 2030-01")
