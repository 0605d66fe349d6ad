package server_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// TestAuthorizationMatrix calls every endpoint of the agent API as every
// kind of caller, over TLS and over the unix socket, with slots 0 and 1
// loaded by alice, and checks each answer's status. A route of the server's
// table without a case fails the test, so a new endpoint cannot ship
// without a decision on who may call it.
func TestAuthorizationMatrix(t *testing.T) {
	reg := startRegistry(t)
	a := startAgent(t, reg, options{tls: true})
	tlsClient := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13}}}
	sockClient := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", a.socket)
		}}}
	type caller struct {
		name   string
		client *http.Client
		base   string
		token  string
	}
	tlsBase, sockBase := "https://"+a.tcp, "http://faasd"
	callers := []caller{
		{"tls anonymous", tlsClient, tlsBase, ""},
		{"tls unknown token", tlsClient, tlsBase, "faas_" + strings.Repeat("A", 43)},
		{"tls bob", tlsClient, tlsBase, reg.tokens["bob"]},
		{"tls alice", tlsClient, tlsBase, reg.tokens["alice"]},
		{"socket bob", sockClient, sockBase, reg.tokens["bob"]},
		{"socket alice", sockClient, sockBase, reg.tokens["alice"]},
		// This process runs as the agent's own uid: an operator's.
		{"socket operator", sockClient, sockBase, ""},
	}
	do := func(c caller, method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if strings.HasSuffix(path, "/session") {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "faas-session/1")
		}
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatalf("%s %s as %s: %v", method, path, c.name, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
		return res.StatusCode, b
	}
	// A load of alice's, for the load endpoints: it fails (no such
	// image), but it is hers.
	a.ownedBy(t, "alice")
	code, b := do(callers[3], "POST", "/v1/loads", `{"image": "acme/none:1"}`)
	var started struct{ ID string }
	if err := json.Unmarshal(b, &started); err != nil || started.ID == "" {
		t.Fatalf("alice's load: %d %s", code, b)
	}
	load := "/v1/loads/" + started.ID
	// settle waits until a load or pull the last call started has ended:
	// the node runs a few at once (503 beyond), and the matrix is about
	// who may call, not how many loads a loaded machine has finished.
	settle := func(code int, body []byte) {
		t.Helper()
		var l agentapi.Load
		if code < 200 || code >= 300 || json.Unmarshal(body, &l) != nil || l.ID == "" || l.Kind == "" {
			return
		}
		for deadline := time.Now().Add(time.Minute); l.State == agentapi.LoadRunning || l.State == ""; {
			if time.Now().After(deadline) {
				t.Fatalf("load %s still running after a minute", l.ID)
			}
			time.Sleep(10 * time.Millisecond)
			_, b := do(callers[len(callers)-1], "GET", "/v1/loads/"+l.ID, "")
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatalf("load %s: %s", l.ID, b)
			}
		}
	}
	settle(code, b)

	const (
		ok   = 200 // any 2xx
		deny = 403
		anon = 401
	)
	cases := []struct {
		pattern    string
		path, body string
		want       []int // per caller, in the order above
	}{
		{"GET /healthz", "/healthz", "", []int{ok, ok, ok, ok, ok, ok, ok}},
		{"GET /v1/node", "/v1/node", "", []int{ok, ok, ok, ok, ok, ok, ok}},
		{"GET /v1/slots", "/v1/slots", "", []int{anon, anon, ok, ok, ok, ok, ok}},
		{"GET /v1/slots/{n}", "/v1/slots/0", "", []int{anon, anon, ok, ok, ok, ok, ok}},
		{"POST /v1/slots/{n}/clear", "/v1/slots/0/clear", "", []int{anon, anon, deny, ok, deny, ok, ok}},
		// A loopback slot has no AliDNN engine: slot_busy for everyone
		// authenticated (session authorization: session_test.go).
		{"POST /v1/slots/{n}/session", "/v1/slots/0/session", "", []int{anon, anon, 409, 409, 409, 409, 409}},
		{"GET /v1/slots/{n}/ddr", "/v1/slots/0/ddr?addr=0&len=16", "", []int{anon, anon, deny, deny, deny, deny, ok}},
		{"PUT /v1/slots/{n}/ddr", "/v1/slots/0/ddr?addr=0", `{"data": "AAAAAA=="}`, []int{anon, anon, deny, deny, deny, deny, ok}},
		// Loads need a tenant's token: the agent pulls with it.
		{"POST /v1/loads", "/v1/loads", `{"image": "acme/none:1"}`, []int{anon, anon, ok, ok, ok, ok, anon}},
		{"POST /v1/pulls", "/v1/pulls", `{"image": "acme/none:1"}`, []int{anon, anon, ok, ok, ok, ok, anon}},
		{"GET /v1/loads/{id}", load, "", []int{anon, anon, 404, ok, 404, ok, ok}},
		{"GET /v1/loads/{id}/events", load + "/events", "", []int{anon, anon, 404, ok, 404, ok, ok}},
		{"GET /v1/images", "/v1/images", "", []int{anon, anon, ok, ok, ok, ok, ok}},
		{"GET /metrics", "/metrics", "", []int{anon, anon, deny, deny, deny, deny, ok}},
	}
	covered := map[string]bool{}
	var errs []string
	for _, c := range cases {
		covered[c.pattern] = true
		method, _, _ := strings.Cut(c.pattern, " ")
		for i, who := range callers {
			a.ownedBy(t, "alice") // every call sees the same slots
			got, body := do(who, method, c.path, c.body)
			settle(got, body)
			want := c.want[i]
			if got != want && !(want == ok && got >= 200 && got < 300) {
				errs = append(errs, fmt.Sprintf("%s as %s: %d, want %d: %.200s", c.pattern, who.name, got, want, body))
			}
			if got >= 400 && !regexp.MustCompile(`"code":\s*"[a-z_]+"`).Match(body) {
				errs = append(errs, fmt.Sprintf("%s as %s: %d without an error code: %.200s", c.pattern, who.name, got, body))
			}
		}
	}
	for _, e := range errs {
		t.Error(e)
	}
	for _, p := range a.srv.Patterns() {
		if !covered[p] {
			t.Errorf("route %s is not in the matrix", p)
		}
	}
	t.Logf("%d cases", len(cases)*len(callers))
}
