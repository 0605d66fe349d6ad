package portal_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// TestBrowserWebhookRetried: an ISV adds a webhook in the portal; a tenant
// subscribes to its listing; the receiver fails the first attempt and the
// worker retries it; the ISV sees both attempts in the delivery log and
// redelivers by hand. Every request the receiver gets is signed with the
// secret the portal showed once, and all carry the event's id.
func TestBrowserWebhookRetried(t *testing.T) {
	hook := newReceiver(t, http.StatusInternalServerError, http.StatusOK, http.StatusOK)
	r := newRigWith(t, func(c *server.Config) {
		c.Webhooks = webhooks.Config{AllowLoopback: true, Backoff: 300 * time.Millisecond, MaxBackoff: time.Second,
			Poll: 50 * time.Millisecond}
	})
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	listing := r.listing("acme", "Fast AES", "AES at line rate.", true)

	c := newChrome(t)
	signInChrome(c, r.url, "acme")
	c.run("webhooks", chromedp.Navigate(r.url+"/webhooks"), chromedp.WaitVisible("#hook-url", chromedp.ByID),
		chromedp.SendKeys("#hook-url", hook.srv.URL+"/faas-events", chromedp.ByID))
	c.follow("add webhook", chromedp.Submit("#hook-url", chromedp.ByID), "#new-secret")
	secret := strings.TrimSpace(c.text("#new-secret"))
	var logURL string
	var ok bool
	c.run("webhook link", chromedp.AttributeValue(`tbody a[href^="/webhooks/"]`, "href", &logURL, &ok, chromedp.ByQuery))
	if secret == "" || !ok {
		t.Fatalf("after adding the webhook: secret %q, link %v", secret, ok)
	}
	c.shot("60-webhook-created")
	c.clean("webhooks")

	r.api("alice", http.MethodPost, "/listings/"+listing+"/subscribe", nil, nil)
	got := hook.wait(t, 2)
	for i, d := range got {
		if err := webhooks.Verify(d.header.Get("Faas-Signature"), secret, d.body, 0, time.Now()); err != nil {
			t.Errorf("attempt %d: signature: %v", i+1, err)
		}
		if d.header.Get("Faas-Event") != registryapi.EventSubscriptionCreated || d.header.Get("Faas-Event-Id") != got[0].header.Get("Faas-Event-Id") {
			t.Errorf("attempt %d: event %q id %q, want %s and the first attempt's id", i+1, d.header.Get("Faas-Event"),
				d.header.Get("Faas-Event-Id"), registryapi.EventSubscriptionCreated)
		}
	}
	if got[1].header.Get("Faas-Delivery") != got[0].header.Get("Faas-Delivery") {
		t.Errorf("the retry is another delivery (%s, %s), want the same one attempted again",
			got[0].header.Get("Faas-Delivery"), got[1].header.Get("Faas-Delivery"))
	}

	// The log shows the delivery succeeded on its second attempt; the
	// worker writes that after the receiver answered, so wait for it.
	row := `tbody tr:first-child`
	c.run("delivery log", chromedp.Navigate(r.url+logURL), chromedp.WaitVisible(row, chromedp.ByQuery))
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(c.text(row), "succeeded"); {
		if time.Now().After(deadline) {
			t.Fatalf("delivery log: %q, want the delivery succeeded", c.text("tbody"))
		}
		time.Sleep(100 * time.Millisecond)
		c.run("reload the log", chromedp.Reload(), chromedp.WaitVisible(row, chromedp.ByQuery))
	}
	if attempts, last := c.text(row+" td:nth-child(4)"), c.text(row+" td:nth-child(5)"); strings.TrimSpace(attempts) != "2" ||
		!strings.HasPrefix(strings.TrimSpace(last), "200") {
		t.Errorf("delivery row %q: %q attempts, last answer %q, want 2 and 200", c.text(row), attempts, last)
	}
	c.shot("61-webhook-log")

	c.follow("redeliver", chromedp.Click(`form[action$="/redeliver"] button`, chromedp.ByQuery), "tbody")
	got = hook.wait(t, 3)
	redelivery := got[2]
	if err := webhooks.Verify(redelivery.header.Get("Faas-Signature"), secret, redelivery.body, 0, time.Now()); err != nil {
		t.Errorf("redelivery: signature: %v", err)
	}
	if redelivery.header.Get("Faas-Event-Id") != got[0].header.Get("Faas-Event-Id") ||
		redelivery.header.Get("Faas-Delivery") == got[0].header.Get("Faas-Delivery") {
		t.Errorf("redelivery: event %q delivery %q, want the same event as a new delivery",
			redelivery.header.Get("Faas-Event-Id"), redelivery.header.Get("Faas-Delivery"))
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		c.run("reload the log", chromedp.Reload(), chromedp.WaitVisible(row, chromedp.ByQuery))
		if text := c.text("tbody"); strings.Contains(text, "(redelivery)") && strings.Count(text, "succeeded") == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log after the redelivery: %q", c.text("tbody"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.shot("62-webhook-redelivered")
	c.clean("webhook log")
}

// receiver is a webhook endpoint that answers its requests with the
// statuses it was given, in order, and records them.
type receiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	statuses []int
	got      []delivery
	arrived  chan struct{}
}

type delivery struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	h := &receiver{statuses: statuses, arrived: make(chan struct{}, 64)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		h.mu.Lock()
		status := http.StatusGone
		if n := len(h.got); n < len(h.statuses) {
			status = h.statuses[n]
		}
		h.got = append(h.got, delivery{req.Header.Clone(), body})
		h.mu.Unlock()
		w.WriteHeader(status)
		h.arrived <- struct{}{}
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// wait returns the first n requests once they have arrived.
func (h *receiver) wait(t *testing.T, n int) []delivery {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		h.mu.Lock()
		got := h.got
		h.mu.Unlock()
		if len(got) >= n {
			return got[:n]
		}
		select {
		case <-h.arrived:
		case <-timeout:
			t.Fatalf("the receiver got %d requests, want %d", len(got), n)
		}
	}
}
