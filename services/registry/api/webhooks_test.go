package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// receiver is a webhook endpoint that checks every delivery's signature
// and answers with its current status.
type receiver struct {
	t      *testing.T
	secret atomic.Value // string
	status atomic.Int32
	mu     sync.Mutex
	got    []received
}

type received struct {
	event              webhooks.Event
	delivery, sigError string
}

func newReceiver(t *testing.T) (*receiver, *httptest.Server) {
	r := &receiver{t: t}
	r.secret.Store("")
	r.status.Store(http.StatusOK)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		var rec received
		if err := webhooks.Verify(req.Header.Get(webhooks.SignatureHeader), r.secret.Load().(string), body, 0, time.Now()); err != nil {
			rec.sigError = err.Error()
		}
		if err := json.Unmarshal(body, &rec.event); err != nil {
			rec.sigError += " body: " + err.Error()
		}
		if rec.event.ID != req.Header.Get("Faas-Event-Id") || rec.event.Type != req.Header.Get("Faas-Event") ||
			req.Header.Get("User-Agent") != "faas-webhooks/1" {
			rec.sigError += " headers disagree with the body"
		}
		rec.delivery = req.Header.Get("Faas-Delivery")
		r.mu.Lock()
		r.got = append(r.got, rec)
		r.mu.Unlock()
		w.WriteHeader(int(r.status.Load()))
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) received() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// runWorker runs a webhook worker with a backoff of milliseconds until the
// test ends.
func runWorker(t *testing.T, e *env, allowLoopback bool) *webhooks.Worker {
	w, err := webhooks.New(webhooks.Config{Pool: e.pool, AllowLoopback: allowLoopback, Timeout: 2 * time.Second,
		Backoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxAttempts: 3, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// publicListing is a published public listing of isv1 that tenants may
// subscribe to.
func publicListing(t *testing.T, e *env, repo string) registryapi.Listing {
	var l registryapi.Listing
	e.pushManifest(repo, "v1")
	e.must(201, "isv1", "POST", "/listings", item{"name": repo, "repository": repo, "visibility": "public"}).decode(t, &l)
	e.must(200, "isv1", "POST", "/listings/"+l.ID+"/publish", nil)
	return l
}

// TestWebhookDeliveredRetriedRedelivered: a delivery succeeds, signed; the
// receiver then fails, the worker retries until the attempts are spent;
// a redelivery by hand through the API succeeds with the same event id.
func TestWebhookDeliveredRetriedRedelivered(t *testing.T) {
	e := newEnvWith(t, api.Config{WebhookAllowLoopback: true})
	ctx := context.Background()
	rcv, srv := newReceiver(t)
	isv := e.client("isv1")
	hook, err := isv.CreateWebhook(ctx, registryapi.NewWebhook{URL: srv.URL + "/in", Events: []string{registryapi.EventSubscriptionCreated}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hook.Secret, "whsec_") {
		t.Fatalf("secret %q", hook.Secret)
	}
	rcv.secret.Store(hook.Secret)
	if got, err := isv.Webhook(ctx, hook.ID); err != nil || got.Secret != "" {
		t.Fatalf("the secret is shown again: %+v, %v", got, err)
	}
	runWorker(t, e, true)
	l := publicListing(t, e, "isv1/hooked")

	// Delivered.
	e.must(201, "tenant1", "POST", "/listings/"+l.ID+"/subscribe", nil)
	eventually(t, "the first delivery", func() bool { return len(rcv.received()) == 1 })
	first := rcv.received()[0]
	var data struct {
		ListingID string `json:"listing_id"`
	}
	_ = json.Unmarshal(first.event.Data, &data)
	if first.sigError != "" || first.event.Type != registryapi.EventSubscriptionCreated || data.ListingID != l.ID {
		t.Fatalf("first delivery %+v", first)
	}
	deliveries := func() []registryapi.WebhookDelivery {
		p, err := isv.WebhookDeliveries(ctx, hook.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p.Items
	}
	eventually(t, "the first delivery recorded", func() bool { d := deliveries(); return len(d) == 1 && d[0].State == "succeeded" })

	// Fails, retried, failed for good.
	rcv.status.Store(http.StatusInternalServerError)
	e.must(201, "tenant2", "POST", "/listings/"+l.ID+"/subscribe", nil)
	eventually(t, "the retries spent", func() bool { d := deliveries(); return len(d) == 2 && d[0].State == "failed" })
	failed := deliveries()[0]
	if failed.Attempts != 3 || failed.StatusCode != 500 || failed.Error == "" {
		t.Fatalf("failed delivery %+v", failed)
	}
	got := rcv.received()
	if len(got) != 4 {
		t.Fatalf("%d requests, want 1 + 3 attempts", len(got))
	}
	for _, r := range got[1:] {
		if r.sigError != "" || r.event.ID != got[1].event.ID || r.delivery != failed.ID {
			t.Fatalf("attempt %+v of delivery %s", r, failed.ID)
		}
	}

	// Redelivered by hand. The webhook is inactive meanwhile, so that the
	// redelivery waits and a second one is refused while it does.
	off, on := false, true
	if _, err := isv.UpdateWebhook(ctx, hook.ID, registryapi.WebhookUpdate{Active: &off}); err != nil {
		t.Fatal(err)
	}
	rcv.status.Store(http.StatusNoContent)
	re, err := isv.Redeliver(ctx, hook.ID, failed.ID)
	if err != nil || re.RedeliveryOf != failed.ID || re.EventID != failed.EventID || re.State != "pending" {
		t.Fatalf("redeliver: %+v, %v", re, err)
	}
	var refused *registryclient.Error
	if _, err := isv.Redeliver(ctx, hook.ID, failed.ID); !errors.As(err, &refused) || refused.Status != http.StatusConflict {
		t.Fatalf("a second redelivery while the first is queued: %v", err)
	}
	if _, err := isv.UpdateWebhook(ctx, hook.ID, registryapi.WebhookUpdate{Active: &on}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the redelivery", func() bool { d := deliveries(); return len(d) == 3 && d[0].State == "succeeded" })
	last := rcv.received()[4]
	if last.sigError != "" || last.event.ID != failed.EventID || last.delivery != re.ID {
		t.Fatalf("redelivery %+v", last)
	}

	// The same events are the ISV's notifications.
	n, err := isv.Notifications(ctx, url.Values{"unread": {"true"}})
	if err != nil || len(n.Items) != 2 || n.Items[0].ID != failed.EventID {
		t.Fatalf("notifications %+v, %v", n, err)
	}
	if err := isv.MarkNotificationRead(ctx, failed.EventID); err != nil {
		t.Fatal(err)
	}
	if n, err = isv.Notifications(ctx, url.Values{"unread": {"true"}}); err != nil || len(n.Items) != 1 || n.Items[0].ID != first.event.ID {
		t.Fatalf("unread after reading one: %+v, %v", n, err)
	}

	// An inactive webhook keeps its settings and gets no new deliveries.
	if h, err := isv.UpdateWebhook(ctx, hook.ID, registryapi.WebhookUpdate{Active: &off}); err != nil || h.Active ||
		len(h.Events) != 1 || h.URL != hook.URL {
		t.Fatalf("deactivated: %+v, %v", h, err)
	}
	e.addUser("tenant3", "tenant")
	e.must(201, "tenant3", "POST", "/listings/"+l.ID+"/subscribe", nil)
	if d := deliveries(); len(d) != 3 {
		t.Fatalf("%d deliveries after an event for an inactive webhook", len(d))
	}
}

// TestWebhookAddresses: URLs to the registry's own host and networks are
// refused when registered, and, for a name that resolves to one, when a
// delivery connects.
func TestWebhookAddresses(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	isv := e.client("isv1")
	for _, u := range []string{"http://hooks.example.com/in", "https://127.0.0.1/in", "https://localhost/in", "https://10.1.2.3/in",
		"https://169.254.169.254/latest/meta-data", "https://[::1]/in", "https://[fd00::1]/in", "https://100.64.0.1/in",
		"https://user:pw@hooks.example.com/in", "ftp://hooks.example.com/in", "/relative"} {
		_, err := isv.CreateWebhook(ctx, registryapi.NewWebhook{URL: u, Events: []string{registryapi.EventTokenExpiring}})
		wantField(t, err, "url")
	}
	_, err := isv.CreateWebhook(ctx, registryapi.NewWebhook{URL: "https://hooks.example.com/in", Events: []string{"nope"}})
	wantField(t, err, "events")
	for i := range registryapi.MaxWebhooksPerAccount + 1 {
		_, err := isv.CreateWebhook(ctx, registryapi.NewWebhook{URL: "https://hooks.example.com/in", Events: []string{registryapi.EventTokenExpiring}})
		if (err != nil) != (i == registryapi.MaxWebhooksPerAccount) {
			t.Fatalf("webhook %d: %v", i+1, err)
		}
	}

	// A webhook on loopback (as if a public name pointed there) gets
	// nothing from a worker that does not allow loopback.
	rcv, srv := newReceiver(t)
	if _, err := e.pool.Exec(ctx, `insert into webhooks (account_id, url, secret, events)
		values ($1::uuid, $2, 'whsec_0123456789abcdef0123456789abcdef', '{token.expiring}')`, e.users["tenant1"].ID, srv.URL); err != nil {
		t.Fatal(err)
	}
	if _, err := e.pool.Exec(ctx, `insert into api_tokens (account_id, name, token_hash, expires_at)
		values ($1::uuid, 'soon', '\x01', now() + interval '1 day')`, e.users["tenant1"].ID); err != nil {
		t.Fatal(err)
	}
	w := runWorker(t, e, false)
	if err := w.Scan(ctx); err != nil { // again: once per token whatever the scans
		t.Fatal(err)
	}
	var state, errText string
	eventually(t, "the refused delivery failed", func() bool {
		err := e.pool.QueryRow(ctx, `select d.state, d.error from webhook_deliveries d join webhooks w on w.id = d.webhook_id
			where w.account_id = $1::uuid`, e.users["tenant1"].ID).Scan(&state, &errText)
		return err == nil && state == "failed"
	})
	if !strings.Contains(errText, "address refused") || len(rcv.received()) != 0 {
		t.Fatalf("error %q, %d requests received", errText, len(rcv.received()))
	}
	n, err := e.client("tenant1").Notifications(ctx, nil)
	if err != nil || len(n.Items) != 1 || n.Items[0].Type != registryapi.EventTokenExpiring {
		t.Fatalf("notifications %+v, %v", n, err)
	}
}

// TestWebhookShutdownHandsBack: a worker stopped while a receiver is still
// answering hands the delivery back, uncounted, for another to send now.
func TestWebhookShutdownHandsBack(t *testing.T) {
	e := newEnvWith(t, api.Config{WebhookAllowLoopback: true})
	ctx := context.Background()
	arrived, quit := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-quit // does not answer while the test runs
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(quit) }) // before srv.Close, which waits for the handler
	hook, err := e.client("isv1").CreateWebhook(ctx, registryapi.NewWebhook{URL: srv.URL, Events: []string{registryapi.EventSubscriptionCreated}})
	if err != nil {
		t.Fatal(err)
	}
	w, err := webhooks.New(webhooks.Config{Pool: e.pool, AllowLoopback: true, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx) }()
	l := publicListing(t, e, "isv1/shutdown")
	e.must(201, "tenant1", "POST", "/listings/"+l.ID+"/subscribe", nil)
	<-arrived
	stop()
	<-done
	var state string
	var attempts int
	if err := e.pool.QueryRow(ctx, `select state, attempts from webhook_deliveries where webhook_id = $1`, hook.ID).Scan(&state, &attempts); err != nil {
		t.Fatal(err)
	}
	if state != "pending" || attempts != 0 {
		t.Fatalf("after shutdown: %s after %d attempts, want pending after 0", state, attempts)
	}
}
