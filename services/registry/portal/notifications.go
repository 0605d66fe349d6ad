package portal

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// notificationsPage is the in-portal list of the account's events, the
// same events its webhooks receive.
type notificationsPage struct {
	Items      []notificationView
	UnreadOnly bool
}

// notificationView is a notification with the sentence that says it.
type notificationView struct {
	ID, Text string
	At       time.Time
	Unread   bool
}

func (notificationsPage) title() string { return "Notifications" }
func (notificationsPage) nav() string   { return "notifications" }

func (p *Portal) notifications(w http.ResponseWriter, r *http.Request) {
	unread := r.URL.Query().Get("unread") == "1"
	q := url.Values{"limit": {"100"}}
	if unread {
		q.Set("unread", "true")
	}
	res, err := p.apiAs(accountOf(r)).Notifications(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := notificationsPage{UnreadOnly: unread}
	for _, n := range res.Items {
		pg.Items = append(pg.Items, notificationView{ID: n.ID, Text: describe(n), At: n.CreatedAt, Unread: n.ReadAt == nil})
	}
	p.render(w, r, http.StatusOK, pageNotifications, pg)
}

func (p *Portal) readNotification(w http.ResponseWriter, r *http.Request) {
	if err := p.apiAs(accountOf(r)).MarkNotificationRead(r.Context(), r.PathValue("id")); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/notifications", http.StatusSeeOther)
}

// describe says what a notification is about in a sentence; the template
// escapes it.
func describe(n registryapi.Notification) string {
	var d struct {
		Repository  string    `json:"repository"`
		Digest      string    `json:"digest"`
		State       string    `json:"state"`
		ListingName string    `json:"listing_name"`
		Tenant      string    `json:"tenant"`
		Name        string    `json:"name"`
		ExpiresAt   time.Time `json:"expires_at"`
		Currency    string    `json:"currency"`
		Month       string    `json:"month"`
		Spend       int64     `json:"spend_micros"`
		Alert       int64     `json:"alert_micros"`
		Limit       *int64    `json:"limit_micros"`
	}
	_ = json.Unmarshal(n.Data, &d) // a field that does not decode is left out of the sentence
	switch n.Type {
	case registryapi.EventValidationFinished:
		return "Validation of " + d.Repository + "@" + shortDigest(d.Digest) + " finished: " + d.State + "."
	case registryapi.EventSubscriptionCreated:
		return d.Tenant + " subscribed to " + d.ListingName + "."
	case registryapi.EventTokenExpiring:
		return "API token “" + d.Name + "” expires on " + d.ExpiresAt.UTC().Format("2006-01-02 15:04 UTC") + "."
	case registryapi.EventSpendThreshold:
		s := "Your spend in " + d.Month + " reached " + price(d.Currency, d.Spend) + ", past your alert at " + price(d.Currency, d.Alert) + "."
		if d.Limit != nil {
			s += " At your hard limit of " + price(d.Currency, *d.Limit) + " new loads and attachments are refused."
		}
		return s
	}
	return n.Type
}
