package portal

import (
	"net/http"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// spendRow is a currency's spend this month on the tenant's pages.
type spendRow struct {
	registryapi.SpendLimit
	Spent, Alert, Limit string // formatted; "" when none
	Alerted             bool   // the spend has reached the alert
}

func spendRows(ls registryapi.SpendLimits) []spendRow {
	var out []spendRow
	for _, l := range ls.Items {
		row := spendRow{SpendLimit: l, Spent: price(l.Currency, l.SpendMicros)}
		if l.AlertMicros != nil {
			row.Alert, row.Alerted = price(l.Currency, *l.AlertMicros), l.SpendMicros >= *l.AlertMicros
		}
		if l.LimitMicros != nil {
			row.Limit = price(l.Currency, *l.LimitMicros)
		}
		out = append(out, row)
	}
	return out
}

// spendForm is the tenant's spend-limit form: the values as typed (decimal
// amounts of the currency; empty is none), its refusal, and the month's
// spend in every currency.
type spendForm struct {
	formRefusal
	Currency, Alert, Limit string
	Month                  string
	Spend                  []spendRow
}

func (spendForm) title() string { return "Spend limit" }
func (spendForm) nav() string   { return "my" }

// spendLimitForm shows the form for ?currency= (else the first currency
// with a limit or spend, else USD) with its limits filled in.
func (p *Portal) spendLimitForm(w http.ResponseWriter, r *http.Request) {
	f := spendForm{Currency: strings.ToUpper(strings.TrimSpace(r.URL.Query().Get("currency")))}
	p.showSpendForm(w, r, http.StatusOK, f, true)
}

// showSpendForm renders f with the month's spend; with fill, the
// currency's stored limits replace the form's values.
func (p *Portal) showSpendForm(w http.ResponseWriter, r *http.Request, status int, f spendForm, fill bool) {
	acct := accountOf(r)
	ls, err := p.apiAs(acct).SpendLimits(r.Context(), acct.Name)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	f.Month, f.Spend = ls.Month, spendRows(ls)
	if f.Currency == "" {
		f.Currency = "USD"
		if len(ls.Items) > 0 {
			f.Currency = ls.Items[0].Currency
		}
	}
	if fill {
		for _, l := range ls.Items {
			if l.Currency == f.Currency {
				f.Alert, f.Limit = optDecimal(l.AlertMicros), optDecimal(l.LimitMicros)
			}
		}
	}
	p.render(w, r, status, pageSpendLimit, f)
}

func optDecimal(v *int64) string {
	if v == nil {
		return ""
	}
	return decimal(*v)
}

// optMicros reads an optional decimal amount of field: empty is nil.
func optMicros(field, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	v, err := micros(s)
	if err != nil {
		return nil, &fieldError{field, err.Error()}
	}
	if v < 0 {
		return nil, &fieldError{field, "must not be negative"}
	}
	return &v, nil
}

// setSpendLimit saves the form, then redirects to the tenant's page (POST,
// redirect, GET); a refusal shows the form again on its field.
func (p *Portal) setSpendLimit(w http.ResponseWriter, r *http.Request) {
	f := spendForm{Currency: strings.ToUpper(strings.TrimSpace(r.PostFormValue("currency"))),
		Alert: strings.TrimSpace(r.PostFormValue("alert")), Limit: strings.TrimSpace(r.PostFormValue("limit"))}
	var in registryapi.SpendLimitUpdate
	var err error
	if in.AlertMicros, err = optMicros("alert", f.Alert); err == nil {
		in.LimitMicros, err = optMicros("limit", f.Limit)
	}
	if err == nil {
		acct := accountOf(r)
		_, err = p.apiAs(acct).SetSpendLimit(r.Context(), acct.Name, f.Currency, in)
	}
	ae, isAPI := apiRefusal(err)
	switch {
	case err == nil:
		p.redirectFlash(w, r, "/my", "spend-limit-saved")
	case isAPI && (ae.Status >= 500 || ae.Status == http.StatusUnauthorized):
		p.fail(w, r, err)
	default:
		f.formRefusal = refused(err)
		if f.Field == "alert" || f.Field == "limit" {
			f.amountInFormUnits()
		}
		status := http.StatusUnprocessableEntity
		if isAPI {
			status = ae.Status
		}
		p.showSpendForm(w, r, status, f, false)
	}
}

// amountInFormUnits words the API's refusal of an amount in the form's
// units, whole units of the currency rather than micro-units.
func (f *spendForm) amountInFormUnits() {
	switch {
	case strings.Contains(f.FieldMsg, "above limit"):
		f.FieldMsg = "is above the hard limit: the alert comes first"
	case strings.Contains(f.FieldMsg, "micro-units"):
		f.FieldMsg = "at most " + decimal(registryapi.MaxSpendMicros)
	}
	f.Error = fieldLabels[f.Field] + ": " + f.FieldMsg
}
