package api

import (
	"cmp"
	"encoding/csv"
	"math/big"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// parseMonth reads the month of a path or query parameter ("YYYY-MM",
// UTC); an empty query parameter is the month now running.
func parseMonth(s string) (time.Time, error) {
	if s == "" {
		y, m, _ := time.Now().UTC().Date()
		return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC), nil
	}
	t, err := time.Parse(monthLayout, s)
	if err != nil || t.Year() < 2000 {
		return time.Time{}, fieldErr("month", "want a month as YYYY-MM")
	}
	return t, nil
}

// party is whose statements the caller asks for: its own, or for an admin
// those of ?param= (everyone's when absent).
func party(c echo.Context, p *principal, param string) (string, error) {
	if !p.is(auth.RoleAdmin) {
		return p.ID, nil
	}
	id := c.QueryParam(param)
	if id != "" && !isUUID(id) {
		return "", fieldErr(param, "want an account id")
	}
	return id, nil
}

// wantsCSV: the caller asked for CSV, by ?format=csv or Accept.
func wantsCSV(c echo.Context) (bool, error) {
	switch c.QueryParam("format") {
	case "csv":
		return true, nil
	case "", "json":
		return strings.Contains(c.Request().Header.Get("Accept"), "text/csv"), nil
	}
	return false, fieldErr("format", "want json or csv")
}

func (a *API) invoices(c echo.Context, p *principal) error {
	month, err := parseMonth(c.QueryParam("month"))
	if err != nil {
		return err
	}
	tenant, err := party(c, p, "tenant_id")
	if err != nil {
		return err
	}
	asCSV, err := wantsCSV(c)
	if err != nil {
		return err
	}
	st, rows, err := a.st.monthLines(c.Request().Context(), month, tenant, "", a.cfg.PlatformFeeBasisPoints)
	if err != nil {
		return err
	}
	out := []registryapi.Invoice{}
	for _, r := range rows {
		if n := len(out); n == 0 || out[n-1].TenantID != r.tenantID || out[n-1].Currency != r.currency {
			out = append(out, registryapi.Invoice{Month: month.Format(monthLayout), TenantID: r.tenantID, Tenant: r.tenant,
				Currency: r.currency, Closed: st.closedAt != nil, ClosedAt: st.closedAt})
		}
		inv := &out[len(out)-1]
		inv.Lines = append(inv.Lines, r.StatementLine)
		inv.TotalMicros += r.AmountMicros
	}
	if !asCSV {
		return c.JSON(http.StatusOK, registryapi.Items[registryapi.Invoice]{Items: out})
	}
	recs := [][]string{{"month", "tenant", "currency", "for_month", "listing_id", "listing", "version", "unit", "quantity", "amount_micros"}}
	for _, inv := range out {
		for _, l := range inv.Lines {
			recs = append(recs, append([]string{inv.Month, inv.Tenant, inv.Currency}, lineCSV(l)...))
		}
		recs = append(recs, []string{inv.Month, inv.Tenant, inv.Currency, "", "", "", "", "total", "", strconv.FormatInt(inv.TotalMicros, 10)})
	}
	return writeCSV(c, "invoices-"+month.Format(monthLayout), recs)
}

func (a *API) revenueStatements(c echo.Context, p *principal) error {
	month, err := parseMonth(c.QueryParam("month"))
	if err != nil {
		return err
	}
	isv, err := party(c, p, "isv_id")
	if err != nil {
		return err
	}
	asCSV, err := wantsCSV(c)
	if err != nil {
		return err
	}
	st, rows, err := a.st.monthLines(c.Request().Context(), month, "", isv, a.cfg.PlatformFeeBasisPoints)
	if err != nil {
		return err
	}
	out := revenue(month, st, rows)
	if !asCSV {
		return c.JSON(http.StatusOK, registryapi.Items[registryapi.RevenueStatement]{Items: out})
	}
	recs := [][]string{{"month", "isv", "currency", "for_month", "listing_id", "listing", "version", "unit", "quantity", "amount_micros"}}
	for _, s := range out {
		for _, l := range s.Lines {
			recs = append(recs, append([]string{s.Month, s.ISV, s.Currency}, lineCSV(l)...))
		}
		for _, t := range []struct {
			unit   string
			amount int64
		}{{"gross", s.GrossMicros}, {"fee", s.FeeMicros}, {"net", s.NetMicros}} {
			recs = append(recs, []string{s.Month, s.ISV, s.Currency, "", "", "", "", t.unit, "", strconv.FormatInt(t.amount, 10)})
		}
	}
	return writeCSV(c, "revenue-"+month.Format(monthLayout), recs)
}

// revenue sums the tenants' lines into one statement per ISV and currency,
// a line per month of usage, listing, version and unit.
func revenue(month time.Time, st monthState, rows []lineRow) []registryapi.RevenueStatement {
	type key struct{ isv, currency string }
	type lineKey struct{ forMonth, listing, version, unit string }
	idx := map[key]int{}
	lineIdx := map[key]map[lineKey]int{}
	out := []registryapi.RevenueStatement{}
	for _, r := range rows {
		k := key{r.isvID, r.currency}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k], lineIdx[k] = i, map[lineKey]int{}
			out = append(out, registryapi.RevenueStatement{Month: month.Format(monthLayout), ISVID: r.isvID, ISV: r.isv,
				Currency: r.currency, Closed: st.closedAt != nil, ClosedAt: st.closedAt, FeeBasisPoints: st.feeBP})
		}
		s := &out[i]
		lk := lineKey{r.ForMonth, r.ListingID, r.Version, r.Unit}
		j, ok := lineIdx[k][lk]
		if !ok {
			j = len(s.Lines)
			lineIdx[k][lk] = j
			l := r.StatementLine
			l.Quantity, l.AmountMicros = 0, 0
			s.Lines = append(s.Lines, l)
		}
		s.Lines[j].Quantity += r.Quantity
		s.Lines[j].AmountMicros += r.AmountMicros
		s.GrossMicros += r.AmountMicros
	}
	for i := range out {
		out[i].FeeMicros = fee(out[i].GrossMicros, out[i].FeeBasisPoints)
		out[i].NetMicros = out[i].GrossMicros - out[i].FeeMicros
		slices.SortFunc(out[i].Lines, func(a, b registryapi.StatementLine) int {
			return cmp.Or(cmp.Compare(a.ForMonth, b.ForMonth), cmp.Compare(a.Listing, b.Listing), cmp.Compare(a.ListingID, b.ListingID),
				cmp.Compare(a.Version, b.Version), cmp.Compare(a.Unit, b.Unit))
		})
	}
	slices.SortFunc(out, func(a, b registryapi.RevenueStatement) int {
		return cmp.Or(cmp.Compare(a.ISV, b.ISV), cmp.Compare(a.Currency, b.Currency))
	})
	return out
}

// fee is bp basis points of gross, rounded down to the micro-unit like
// every amount; big.Int, since gross × bp may pass int64.
func fee(gross int64, bp int) int64 {
	// Div is Euclidean: the floor, for a positive divisor.
	return new(big.Int).Div(new(big.Int).Mul(big.NewInt(gross), big.NewInt(int64(bp))), big.NewInt(10000)).Int64()
}

func lineCSV(l registryapi.StatementLine) []string {
	return []string{l.ForMonth, l.ListingID, l.Listing, l.Version, l.Unit, strconv.FormatInt(l.Quantity, 10), strconv.FormatInt(l.AmountMicros, 10)}
}

func writeCSV(c echo.Context, name string, recs [][]string) error {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="`+name+`.csv"`)
	c.Response().WriteHeader(http.StatusOK)
	return csv.NewWriter(c.Response()).WriteAll(recs)
}

func (a *API) closeMonth(c echo.Context, p *principal) error {
	month, err := parseMonth(c.Param("month"))
	if err != nil {
		return err
	}
	out, err := a.st.closeMonth(c.Request().Context(), p, month, a.cfg.PlatformFeeBasisPoints)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
