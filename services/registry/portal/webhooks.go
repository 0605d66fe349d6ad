package portal

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// createdSecretCookie carries a new webhook's secret across the redirect
// after its creation (POST-redirect-GET), so that a reload does not create
// another: scoped to /webhooks, HttpOnly, a minute at most, and cleared by
// the page that shows it once.
const createdSecretCookie = "faas_webhook_secret"

type webhooksPage struct {
	Webhooks   []registryapi.Webhook
	EventTypes []string
	Created    *createdWebhook
	Error      string
	URL        string
}

type createdWebhook struct{ ID, Secret string }

func (webhooksPage) title() string { return "Webhooks" }
func (webhooksPage) nav() string   { return "notifications" }

func (p *Portal) webhooks(w http.ResponseWriter, r *http.Request) {
	pg := webhooksPage{}
	if c, err := r.Cookie(createdSecretCookie); err == nil {
		if id, secret, ok := strings.Cut(c.Value, "."); ok && id == r.URL.Query().Get("created") {
			pg.Created = &createdWebhook{ID: id, Secret: secret}
		}
		http.SetCookie(w, &http.Cookie{Name: createdSecretCookie, Path: "/webhooks", MaxAge: -1})
		w.Header().Set("Cache-Control", "no-store")
	}
	p.showWebhooks(w, r, http.StatusOK, pg)
}

func (p *Portal) showWebhooks(w http.ResponseWriter, r *http.Request, status int, pg webhooksPage) {
	res, err := p.apiAs(accountOf(r)).Webhooks(r.Context(), url.Values{"limit": {"100"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Webhooks, pg.EventTypes = res.Items, registryapi.EventTypes
	p.render(w, r, status, pageWebhooks, pg)
}

func (p *Portal) createWebhook(w http.ResponseWriter, r *http.Request) {
	req := registryapi.NewWebhook{URL: strings.TrimSpace(r.PostFormValue("url")),
		Description: strings.TrimSpace(r.PostFormValue("description")), Events: r.PostForm["events"]}
	hook, err := p.apiAs(accountOf(r)).CreateWebhook(r.Context(), req)
	if ae, ok := apiRefusal(err); ok && ae.Status < 500 && ae.Status != http.StatusUnauthorized {
		p.showWebhooks(w, r, ae.Status, webhooksPage{Error: ae.Message, URL: req.URL})
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: createdSecretCookie, Value: hook.ID + "." + hook.Secret, Path: "/webhooks",
		MaxAge: 60, HttpOnly: true, Secure: p.cfg.Secure, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, "/webhooks?created="+url.QueryEscape(hook.ID), http.StatusSeeOther)
}

func (p *Portal) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	if err := p.apiAs(accountOf(r)).DeleteWebhook(r.Context(), r.PathValue("id")); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/webhooks", http.StatusSeeOther)
}

// webhookPage is one webhook with its delivery log.
type webhookPage struct {
	Webhook    registryapi.Webhook
	Deliveries []registryapi.WebhookDelivery
}

func (pg webhookPage) title() string { return "Webhook " + pg.Webhook.URL }
func (webhookPage) nav() string      { return "notifications" }

func (p *Portal) webhook(w http.ResponseWriter, r *http.Request) {
	api := p.apiAs(accountOf(r))
	hook, err := api.Webhook(r.Context(), r.PathValue("id"))
	if err != nil {
		p.fail(w, r, err)
		return
	}
	res, err := api.WebhookDeliveries(r.Context(), hook.ID, url.Values{"limit": {"100"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, pageWebhook, webhookPage{Webhook: hook, Deliveries: res.Items})
}

func (p *Portal) redeliverWebhook(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := p.apiAs(accountOf(r)).Redeliver(r.Context(), id, r.PathValue("delivery")); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/webhooks/"+url.PathEscape(id), http.StatusSeeOther)
}
