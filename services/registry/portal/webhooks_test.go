package portal_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestWebhookPages: a webhook is created with its secret shown once after
// the redirect, its delivery log offers Redeliver, which queues a
// redelivery; the notifications list marks events read; the webhook is
// deleted.
func TestWebhookPages(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	r.user("hookisv", auth.RoleISV)
	b := r.browser()
	b.signIn("hookisv")
	_, page := b.get("/webhooks")
	tok := csrf(t, page)
	resp, _ := b.do(http.MethodPost, "/webhooks", url.Values{"csrf": {tok}, "url": {"https://hooks.invalid/in"},
		"events": {"token.expiring"}}, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/webhooks?created=") {
		t.Fatalf("create: %d to %q", resp.StatusCode, loc)
	}
	id := strings.TrimPrefix(loc, "/webhooks?created=")
	var secret, account string
	if err := r.srv.Pool().QueryRow(ctx, `select secret, account_id::text from webhooks where id = $1`, id).Scan(&secret, &account); err != nil {
		t.Fatal(err)
	}
	resp, page = b.get(loc)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, secret) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("after the redirect: %d, secret shown %v", resp.StatusCode, strings.Contains(page, secret))
	}
	if _, page = b.get(loc); strings.Contains(page, secret) || !strings.Contains(page, "hooks.invalid") {
		t.Fatal("the secret is shown a second time, or the webhook is not listed")
	}

	// An event, and its delivery failed for good, as the worker would leave it.
	var delivery string
	if _, err := r.srv.Pool().Exec(ctx, `insert into events (account_id, type, data)
		values ($1::uuid, 'token.expiring', '{"name": "ci", "expires_at": "2030-01-02T03:04:05Z"}')`, account); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.Pool().QueryRow(ctx, `update webhook_deliveries set state = 'failed', attempts = 8, status_code = 500
		where webhook_id = $1 returning id::text`, id).Scan(&delivery); err != nil {
		t.Fatal(err)
	}
	_, page = b.get("/webhooks/" + id)
	if !strings.Contains(page, "/deliveries/"+delivery+"/redeliver") {
		t.Fatalf("no Redeliver button in the log:\n%s", page)
	}
	resp, _ = b.do(http.MethodPost, "/webhooks/"+id+"/deliveries/"+delivery+"/redeliver", url.Values{"csrf": {tok}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/webhooks/"+id {
		t.Fatalf("redeliver: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, page = b.get("/webhooks/" + id); !strings.Contains(page, "(redelivery)") {
		t.Fatal("the redelivery is not in the log")
	}
	resp, _ = b.do(http.MethodPost, "/webhooks/"+id+"/deliveries/"+delivery+"/redeliver", url.Values{}, nil)
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("redeliver without the CSRF token: %d", resp.StatusCode)
	}

	_, page = b.get("/notifications")
	if !strings.Contains(page, "API token “ci” expires on 2030-01-02 03:04 UTC.") {
		t.Fatalf("notifications:\n%s", page)
	}
	var event string
	if err := r.srv.Pool().QueryRow(ctx, `select id::text from events where account_id = $1::uuid`, account).Scan(&event); err != nil {
		t.Fatal(err)
	}
	if resp, _ = b.do(http.MethodPost, "/notifications/"+event+"/read", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("mark read: %d", resp.StatusCode)
	}
	if _, page = b.get("/notifications?unread=1"); !strings.Contains(page, "No notifications.") {
		t.Fatal("a notification marked read is still unread")
	}

	if resp, _ = b.do(http.MethodPost, "/webhooks/"+id+"/delete", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("delete: %d", resp.StatusCode)
	}
	if _, page = b.get("/webhooks"); !strings.Contains(page, "No webhooks yet.") {
		t.Fatal("the deleted webhook is still listed")
	}
}
