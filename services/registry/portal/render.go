package portal

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

var funcs = template.FuncMap{
	"price": price,
	"cost":  cost,
	"date":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
	"bytes": humanBytes,
	// category is a listing's category as the marketplace labels it.
	"category": func(c string) string { return categoryLabels[c] },
}

// price formats micro-units of currency: 1500000 USD is "USD 1.50".
func price(currency string, micros int64) string {
	return fmt.Sprintf("%s %d.%02d", currency, micros/1_000_000, micros%1_000_000/10_000)
}

// cost says what listing l costs: the prices it sets, or that it is
// free, never a price of zero.
func cost(l registryapi.Listing) string {
	var parts []string
	if l.PricePerHourMicros != 0 {
		parts = append(parts, price(l.Currency, l.PricePerHourMicros)+" per hour")
	}
	if l.PricePerLoadMicros != 0 {
		parts = append(parts, price(l.Currency, l.PricePerLoadMicros)+" per load")
	}
	if l.PricePerAttachedHourMicros != 0 {
		parts = append(parts, price(l.Currency, l.PricePerAttachedHourMicros)+" per hour attached from the pool")
	}
	if parts == nil {
		return "Free"
	}
	return strings.Join(parts, ", ")
}

// humanBytes writes n in binary units: 2147483648 is "2 GiB".
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	v := float64(n) / float64(div)
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %ciB", int64(v), "KMGTPE"[exp])
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTPE"[exp])
}

// sessionView is what templates see of the session.
type sessionView struct {
	Name string
	Role auth.Role
	CSRF string
}

// pageData is every page's template data.
type pageData struct {
	Title   string
	Nav     string // the main navigation entry to mark current
	Session *sessionView
	Flash   string
	Back    string // where sign-in returns to: this page, when it is one to return to
	Page    any
}

// titled is implemented by page models that name their page.
type titled interface{ title() string }

type errorPage struct{ Title, Message string }

func (e errorPage) title() string { return e.Title }

// render writes page name with model at status, in the layout.
func (p *Portal) render(w http.ResponseWriter, r *http.Request, status int, name page, model any) {
	d := p.data(r, model)
	if tm, ok := model.(titled); ok {
		d.Title = tm.title()
	}
	if n, ok := model.(interface{ nav() string }); ok {
		d.Nav = n.nav()
	}
	if r.Method == http.MethodGet && status == http.StatusOK && r.URL.Path != "/signin" && r.URL.Path != "/" {
		d.Back = r.URL.RequestURI()
	}
	if c, err := r.Cookie(flashCookie); err == nil {
		d.Flash = flashes[c.Value]
		http.SetCookie(w, &http.Cookie{Name: flashCookie, Path: "/", MaxAge: -1})
	}
	p.execute(w, r, status, name, layoutTemplate, d)
}

// renderFragment writes the template block of page name alone, for htmx
// swaps.
func (p *Portal) renderFragment(w http.ResponseWriter, r *http.Request, name page, block string, model any) {
	p.execute(w, r, http.StatusOK, name, block, p.data(r, model))
}

// data is the template data of model for r's session.
func (p *Portal) data(r *http.Request, model any) pageData {
	d := pageData{Page: model}
	if se := sessionOf(r); se != nil {
		d.Session = &sessionView{Name: se.account.Name, Role: se.account.Role, CSRF: se.csrf}
	}
	return d
}

// execute runs block of page name into a buffer first, so that a failing
// template never sends half a page, then writes it with status.
func (p *Portal) execute(w http.ResponseWriter, r *http.Request, status int, name page, block string, d pageData) {
	var buf bytes.Buffer
	if err := p.pages.byName[name].ExecuteTemplate(&buf, block, d); err != nil {
		p.log.ErrorContext(r.Context(), "portal: render", "name", name, "block", block, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// flashCookie carries a one-shot notice across a redirect; its value is a
// key of flashes, never text of the client's choosing.
const flashCookie = "faas_flash"

var flashes = map[string]string{
	"signed-out":        "You are signed out.",
	"subscribed":        "Subscribed. You can load this accelerator now.",
	"revoked":           "Token revoked.",
	"unsubscribed":      "Subscription ended.",
	"spend-limit-saved": "Spend limit saved.",
	"key-revoked":       "Key revoked. Versions signed only with it no longer load.",
	"published":         "Listing published: tenants can find it now.",
	"unpublished":       "Listing unpublished: tenants no longer find it; subscriptions stay.",
	"saved":             "Listing saved.",
	"shared":            "Private offer sent.",
	"rule-added":        "Tag rule added: matching tags no longer move once pushed.",
	"rule-removed":      "Tag rule removed.",
	"logo-set":          "Logo saved.",
	"logo-removed":      "Logo removed.",
	"docs-saved":        "Documentation saved.",
	// The operator's view.
	"account-created": "Account created.",
	"account-updated": "Account changed.",
	"node-approved":   "Node approved: keys may be released to it from now on.",
	"node-revoked":    "Node revoked.",
	"month-closed":    "Month closed: its invoices and revenue statements are final; usage reported for it from now on is billed as adjustments in the next month closed.",
}

// redirectFlash redirects (303) to, with the notice key.
func (p *Portal) redirectFlash(w http.ResponseWriter, r *http.Request, to, key string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: key, Path: "/", MaxAge: 60, HttpOnly: true,
		Secure: p.cfg.Secure, SameSite: http.SameSiteLaxMode})
	http.Redirect(w, r, to, http.StatusSeeOther)
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
