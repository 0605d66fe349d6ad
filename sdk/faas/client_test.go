package faas_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/faas/faastest"
)

func dial(t *testing.T, a *faastest.Agent, opts ...faas.Option) *faas.Client {
	t.Helper()
	c, err := faas.Dial(context.Background(), "unix://"+a.Socket, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestDial(t *testing.T) {
	a := faastest.New(t)
	ctx := context.Background()
	for _, target := range []string{"unix://" + a.Socket, a.Socket} {
		c, err := faas.Dial(ctx, target)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if c.Target() != a.Socket {
			t.Errorf("Target() = %q", c.Target())
		}
		c.Close()
	}
	t.Setenv("FAAS_AGENT", a.Socket)
	if _, err := faas.Dial(ctx, ""); err != nil {
		t.Fatalf("$FAAS_AGENT: %v", err)
	}

	missing := filepath.Join(filepath.Dir(a.Socket), "nobody.sock")
	_, err := faas.Dial(ctx, missing)
	if !errors.Is(err, faas.ErrUnavailable) || !strings.Contains(err.Error(), "faasd is not running at "+missing) {
		t.Fatalf("missing socket: %v", err)
	}
	if faas.Hint(err) == "" {
		t.Error("no hint for a missing socket")
	}
	for _, bad := range []string{"http://10.0.0.1:8443", "ftp://x", "node1:8443", "https://h:1/path"} {
		if _, err := faas.Dial(ctx, bad); err == nil || errors.Is(err, faas.ErrUnavailable) {
			t.Errorf("Dial(%q) = %v, want a refusal", bad, err)
		}
	}
	// Plain http is fine on loopback.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) }))
	defer srv.Close()
	if _, err := faas.Dial(ctx, srv.URL); err != nil {
		t.Fatalf("loopback http: %v", err)
	}
}

func TestTLS(t *testing.T) {
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			w.Write([]byte("ok"))
		case "/v1/slots":
			auth = r.Header.Get("Authorization")
			w.Write([]byte(`{"slots":[{"index":0,"state":"cleared"}]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	// Without the server's CA the handshake fails: unavailable.
	if _, err := faas.Dial(ctx, srv.URL); !errors.Is(err, faas.ErrUnavailable) {
		t.Fatalf("unknown CA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c, err := faas.Dial(ctx, srv.URL, faas.WithTLSConfig(&tls.Config{RootCAs: pool}), faas.WithToken("faas_secret"))
	if err != nil {
		t.Fatal(err)
	}
	slots, err := c.Slots(ctx)
	if err != nil || len(slots) != 1 || slots[0].State != agentapi.Cleared {
		t.Fatalf("Slots = %+v, %v", slots, err)
	}
	if auth != "Bearer faas_secret" {
		t.Errorf("Authorization %q", auth)
	}
}

func TestSlots(t *testing.T) {
	a := faastest.New(t)
	c := dial(t, a, faas.WithToken("faas_tok"))
	ctx := context.Background()
	slots, err := c.Slots(ctx)
	if err != nil || len(slots) != 2 || slots[0].Image.Name != "aes" || slots[0].Role.ID != 0xae5 || slots[1].State != agentapi.Cleared {
		t.Fatalf("Slots = %+v, %v", slots, err)
	}
	s, err := c.Slot(ctx, 0)
	if err != nil || s.Sensors == nil || s.Sensors.TempC != 51.5 || !s.LoadedAt.Equal(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)) {
		t.Fatalf("Slot(0) = %+v, %v", s, err)
	}
	_, err = c.Slot(ctx, 7)
	var fe *faas.Error
	if !errors.Is(err, faas.ErrNotFound) || !errors.As(err, &fe) || fe.Status != 404 || fe.Hint == "" || faas.Hint(err) != fe.Hint {
		t.Fatalf("Slot(7): %#v", err)
	}
	s, err = c.Clear(ctx, 0)
	if err != nil || s.State != agentapi.Cleared || s.Image != nil {
		t.Fatalf("Clear(0) = %+v, %v", s, err)
	}
	imgs, err := c.Images(ctx)
	if err != nil || len(imgs.Images) != 1 || imgs.MaxBytes != 10<<30 {
		t.Fatalf("Images = %+v, %v", imgs, err)
	}
	for _, h := range a.AuthHeaders() {
		if h != "Bearer faas_tok" {
			t.Fatalf("Authorization %q", h)
		}
	}
}

func TestErrors(t *testing.T) {
	a := faastest.New(t)
	c := dial(t, a)
	cases := []struct {
		code   agentapi.Code
		status int
		is     error
	}{
		{agentapi.CodeNotFound, 404, faas.ErrNotFound},
		{agentapi.CodeUnauthenticated, 401, faas.ErrPermission},
		{agentapi.CodePermission, 403, faas.ErrPermission},
		{agentapi.CodeNotEntitled, 403, faas.ErrNotEntitled},
		{agentapi.CodeSpendLimit, 402, faas.ErrSpendLimit},
		{agentapi.CodeSignature, 422, faas.ErrSignature},
		{agentapi.CodeCountersign, 422, faas.ErrSignature},
		{agentapi.CodeIncompatible, 422, faas.ErrIncompatible},
		{agentapi.CodeBusy, 409, faas.ErrBusy},
		{agentapi.CodeCacheFull, 507, faas.ErrCacheFull},
		{agentapi.CodeUnavailable, 503, faas.ErrUnavailable},
		{agentapi.CodeProgram, 500, faas.ErrProgram},
		{agentapi.CodeSelfTest, 500, faas.ErrProgram},
		{agentapi.CodeBadRequest, 400, nil},
		{agentapi.CodeInternal, 500, nil},
	}
	all := []error{faas.ErrNotFound, faas.ErrPermission, faas.ErrNotEntitled, faas.ErrSpendLimit, faas.ErrSignature, faas.ErrIncompatible,
		faas.ErrBusy, faas.ErrCacheFull, faas.ErrUnavailable, faas.ErrProgram}
	for _, tc := range cases {
		a.Fail(tc.status, &agentapi.Error{Code: tc.code, Message: "msg " + string(tc.code), Hint: "do something"})
		_, err := c.Slots(context.Background())
		var fe *faas.Error
		if !errors.As(err, &fe) || fe.Status != tc.status || fe.Code != tc.code || err.Error() != "msg "+string(tc.code) || fe.Hint != "do something" {
			t.Errorf("%s: %#v", tc.code, err)
			continue
		}
		for _, s := range all {
			if got := errors.Is(err, s); got != (s == tc.is) {
				t.Errorf("%s: errors.Is(%v) = %v", tc.code, s, got)
			}
		}
	}
}

func TestLoad(t *testing.T) {
	a := faastest.New(t)
	c := dial(t, a, faas.WithToken("faas_tok"))
	ctx := context.Background()
	var phases []string
	var sawFinal bool
	l, err := c.Load(ctx, "registry.example/acme/aes:1.2", faas.OnSlot(1), faas.WithProgress(func(ev agentapi.Event) {
		if sawFinal {
			t.Error("event after the final one")
		}
		if ev.Load != nil {
			sawFinal = true
		} else if len(phases) == 0 || phases[len(phases)-1] != ev.Phase {
			phases = append(phases, ev.Phase)
		}
	}))
	if err != nil || l.State != agentapi.LoadDone || !slices.Equal(l.Slots, []int{1}) || len(l.Phases) != 6 || l.ID == "" {
		t.Fatalf("Load = %+v, %v", l, err)
	}
	want := []string{"resolve", "pull", "verify", "key", "program", "self-test"}
	if !slices.Equal(phases, want) || !sawFinal {
		t.Errorf("phases %v (final %v), want %v", phases, sawFinal, want)
	}
	if g, err := c.GetLoad(ctx, l.ID); err != nil || g.State != agentapi.LoadDone {
		t.Errorf("GetLoad = %+v, %v", g, err)
	}
	p, err := c.Pull(ctx, "registry.example/acme/aes:1.2", nil)
	if err != nil || p.Kind != "pull" || p.State != agentapi.LoadDone {
		t.Fatalf("Pull = %+v, %v", p, err)
	}

	// StartLoad returns the running load; Events follows it.
	s, err := c.StartLoad(ctx, agentapi.LoadRequest{Image: "x"})
	if err != nil || s.State != agentapi.LoadRunning {
		t.Fatalf("StartLoad = %+v, %v", s, err)
	}
	n := 0
	l, err = c.Events(ctx, s.ID, func(agentapi.Event) error { n++; return nil })
	if err != nil || l.State != agentapi.LoadDone || n != 9 {
		t.Fatalf("Events: %d events, %+v, %v", n, l, err)
	}
	stop := errors.New("stop")
	if _, err := c.Events(ctx, s.ID, func(agentapi.Event) error { return stop }); err != stop {
		t.Fatalf("Events with a failing fn: %v", err)
	}

	// A failed load is a typed error, with the final load.
	a.FailLoads(agentapi.Error{Code: agentapi.CodeSignature, Message: "bad signature", Hint: "ask the ISV"})
	l, err = c.Load(ctx, "registry.example/acme/evil:1")
	var fe *faas.Error
	if !errors.Is(err, faas.ErrSignature) || !errors.As(err, &fe) || fe.LoadID != l.ID || fe.Hint != "ask the ISV" || l.State != agentapi.LoadFailed {
		t.Fatalf("failed load: %+v, %#v", l, err)
	}
	if _, err := c.Pull(ctx, "x", nil); !errors.Is(err, faas.ErrSignature) {
		t.Fatalf("failed pull: %v", err)
	}
}

func TestStreamCut(t *testing.T) {
	a := faastest.New(t)
	c := dial(t, a)
	a.SetScript(func(kind, image string, slot *int) []agentapi.Event {
		return []agentapi.Event{{Phase: agentapi.PhaseResolve}, {Phase: agentapi.PhasePull, Bytes: 1, Total: 2}}
	})
	n := 0
	_, err := c.Load(context.Background(), "x", faas.WithProgress(func(agentapi.Event) { n++ }))
	if !errors.Is(err, faas.ErrUnavailable) || n != 2 {
		t.Fatalf("cut stream after %d events: %v", n, err)
	}
}

func TestCancel(t *testing.T) {
	a := faastest.New(t)
	c := dial(t, a)
	a.SetHold(true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Load(ctx, "x", faas.WithProgress(func(agentapi.Event) { cancel() }))
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled load: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Load did not return after its context was cancelled")
	}
	// A deadline bounds Dial too.
	ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	time.Sleep(time.Millisecond)
	if _, err := faas.Dial(ctx, a.Socket); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Dial with an expired context: %v", err)
	}
}

func TestBadAnswers(t *testing.T) {
	// A non-JSON error (a proxy) is classified by its status.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			return
		}
		http.Error(w, "upstream down", http.StatusBadGateway)
	}))
	defer srv.Close()
	c, err := faas.Dial(context.Background(), strings.Replace(srv.URL, "127.0.0.1", "localhost", 1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Slots(context.Background()); !errors.Is(err, faas.ErrUnavailable) || !strings.Contains(err.Error(), "upstream down") {
		t.Fatalf("502: %v", err)
	}
}
