package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas/faastest"
)

// run runs the faas command in process, as main would, with stdin.
func run(t *testing.T, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	root := newRoot()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	code = report(&errb, root.ExecuteContext(context.Background()))
	return out.String(), errb.String(), code
}

// agentEnv starts a fake agent and points the environment at it, with an
// empty configuration.
func agentEnv(t *testing.T) *faastest.Agent {
	a := faastest.New(t)
	t.Setenv("FAAS_AGENT", a.Socket)
	t.Setenv("FAAS_CONFIG", filepath.Join(t.TempDir(), "config.json"))
	t.Setenv("FAAS_TOKEN", "")
	return a
}

func TestStatus(t *testing.T) {
	a := agentEnv(t)
	t.Setenv("FAAS_TOKEN", "faas_envtoken")
	out, errOut, code := run(t, "", "status")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "SLOT STATE IMAGE TENANT ROLE LOADED" {
		t.Fatalf("status:\n%s", out)
	}
	if f := strings.Fields(lines[1]); len(f) < 7 || f[0] != "0" || f[1] != "loaded" || f[2] != "registry.example/acme/aes:1.2" || f[3] != "alice" || f[4] != "aes" || f[5] != "1.2" || !strings.HasSuffix(lines[1], " ago") {
		t.Errorf("slot 0 row %q", lines[1])
	}
	if f := strings.Fields(lines[2]); strings.Join(f, " ") != "1 cleared - - - -" {
		t.Errorf("slot 1 row %q", lines[2])
	}
	out, _, code = run(t, "", "status", "--json")
	var slots []agentapi.Slot
	if err := json.Unmarshal([]byte(out), &slots); err != nil || code != 0 || len(slots) != 2 || slots[0].Role.Name != "aes" {
		t.Fatalf("status --json: exit %d, %v:\n%s", code, err, out)
	}
	for _, h := range a.AuthHeaders() {
		if h != "Bearer faas_envtoken" {
			t.Fatalf("Authorization %q", h)
		}
	}

	out, _, code = run(t, "", "describe", "0")
	for _, want := range []string{"State:", "loaded", "0000:3b:00.0", "xcvu9p", "Role:", "id 0xae5", "Temperature:", "51.5 °C", "Link:", "up", "Health:"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("describe: exit %d, no %q in\n%s", code, want, out)
		}
	}
	out, _, code = run(t, "", "describe", "0", "--json")
	var s agentapi.Slot
	if err := json.Unmarshal([]byte(out), &s); err != nil || code != 0 || s.Sensors == nil {
		t.Fatalf("describe --json: exit %d, %v:\n%s", code, err, out)
	}
	_, errOut, code = run(t, "", "describe", "9")
	if code != 2 || errOut != "faas: no slot 9\nhint: faas status lists the slots\n" {
		t.Fatalf("describe 9: exit %d, %q", code, errOut)
	}
	if _, _, code = run(t, "", "describe", "x"); code != 2 {
		t.Fatalf("describe x: exit %d", code)
	}

	out, _, code = run(t, "", "images")
	if code != 0 || !strings.Contains(out, "48.0 MiB") || !strings.Contains(out, "1 blobs, 48.0 MiB used of 10.0 GiB") {
		t.Fatalf("images: exit %d:\n%s", code, out)
	}
	out, _, code = run(t, "", "clear", "0")
	if code != 0 || out != "slot 0 cleared\n" {
		t.Fatalf("clear: exit %d: %q", code, out)
	}
}

func TestAgentMissing(t *testing.T) {
	agentEnv(t)
	missing := filepath.Join(t.TempDir(), "none.sock")
	_, errOut, code := run(t, "", "status", "--agent", missing)
	if code != 7 || !strings.HasPrefix(errOut, "faas: faasd is not running at "+missing) || !strings.Contains(errOut, "\nhint: ") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, errOut, code := run(t, "", "status", "--agent", "http://192.0.2.1:80"); code != 2 {
		t.Fatalf("plain http to another host: exit %d: %s", code, errOut)
	}
}

func TestLoad(t *testing.T) {
	a := agentEnv(t)
	out, errOut, code := run(t, "", "load", "--slot", "1", "registry.example/acme/aes:1.2")
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, errOut)
	}
	// Not a terminal: one line per phase on stderr.
	if errOut != "resolve\npull\nverify\nkey\nprogram\nself-test\n" {
		t.Errorf("progress %q", errOut)
	}
	for _, want := range []string{"loaded registry.example/acme/aes:1.2 into slot 1\n", "digest     sha256:000", "total      2s\n", "  pull       12.5ms\n", "  self-test  12.5ms\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in summary\n%s", want, out)
		}
	}
	out, errOut, code = run(t, "", "load", "--json", "x")
	var l agentapi.Load
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 0 || l.State != agentapi.LoadDone || errOut != "" {
		t.Fatalf("load --json: exit %d, %v: %s %s", code, err, out, errOut)
	}
	out, _, code = run(t, "", "load", "--async", "x")
	if code != 0 || !strings.HasPrefix(out, "load-") || strings.Count(out, "\n") != 1 {
		t.Fatalf("load --async: exit %d: %q", code, out)
	}
	out, errOut, code = run(t, "", "pull", "x")
	if code != 0 || !strings.HasPrefix(out, "pulled x\n") || errOut != "pull\nverify\n" {
		t.Fatalf("pull: exit %d: %q %q", code, out, errOut)
	}

	// Refusals before the load starts.
	for _, tc := range []struct {
		status int
		code   agentapi.Code
		exit   int
	}{
		{401, agentapi.CodeUnauthenticated, 3},
		{403, agentapi.CodeNotEntitled, 3},
		{402, agentapi.CodeSpendLimit, 3},
		{409, agentapi.CodeBusy, 6},
		{422, agentapi.CodeIncompatible, 5},
		{507, agentapi.CodeCacheFull, 8},
		{503, agentapi.CodeUnavailable, 7},
		{400, agentapi.CodeBadRequest, 2},
		{500, agentapi.CodeInternal, 1},
	} {
		a.Fail(tc.status, &agentapi.Error{Code: tc.code, Message: "refused " + string(tc.code)})
		_, errOut, code := run(t, "", "load", "x")
		if code != tc.exit || errOut != "faas: refused "+string(tc.code)+"\n" {
			t.Errorf("%s: exit %d (want %d): %q", tc.code, code, tc.exit, errOut)
		}
	}
	a.Fail(0, nil)

	// Loads that fail on the way.
	a.FailLoads(agentapi.Error{Code: agentapi.CodeSignature, Message: "signature of acme revoked", Hint: "ask acme for a new version"})
	out, errOut, code = run(t, "", "load", "x")
	if code != 4 || out != "" || !strings.HasSuffix(errOut, "faas: signature of acme revoked\nhint: ask acme for a new version\n") {
		t.Fatalf("bad signature: exit %d: %q %q", code, out, errOut)
	}
	a.FailLoads(agentapi.Error{Code: agentapi.CodeSpendLimit, Message: "the registry granted no load: alice has spent 4.000000 USD of its spend limit of 4.000000 USD for 2026-11",
		Hint: "raise your spend limit (portal: Spend limit) or wait until the month ends; what runs is not stopped"})
	out, errOut, code = run(t, "", "load", "x")
	if code != 3 || out != "" || !strings.HasSuffix(errOut, "faas: the registry granted no load: alice has spent 4.000000 USD of its spend limit of 4.000000 USD for 2026-11\n"+
		"hint: raise your spend limit (portal: Spend limit) or wait until the month ends; what runs is not stopped\n") {
		t.Fatalf("spend limit: exit %d: %q %q", code, out, errOut)
	}
	a.FailLoads(agentapi.Error{Code: agentapi.CodeSelfTest, Message: "self-test failed"})
	out, _, code = run(t, "", "load", "--json", "x")
	if err := json.Unmarshal([]byte(out), &l); err != nil || code != 1 || l.State != agentapi.LoadFailed || l.Error.Code != agentapi.CodeSelfTest {
		t.Fatalf("failed self-test --json: exit %d, %v: %s", code, err, out)
	}

	// A stream cut before the end: unavailable.
	a.SetScript(func(kind, image string, slot *int) []agentapi.Event { return []agentapi.Event{{Phase: "resolve"}} })
	if _, errOut, code := run(t, "", "load", "x"); code != 7 {
		t.Fatalf("cut stream: exit %d: %s", code, errOut)
	}
}

func TestLogin(t *testing.T) {
	a := agentEnv(t)
	const secret = "faas_S3cretTokenValue"
	var revoked bool
	reg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/tokens":
			if u, p, ok := r.BasicAuth(); !ok || u != "alice" || p != "pw d" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				w.Write([]byte(`{"error":{"code":"unauthenticated","message":"bad credentials"}}`))
				return
			}
			var req map[string]any
			dec := json.NewDecoder(r.Body)
			if err := dec.Decode(&req); err != nil || len(req) != 1 || !strings.HasPrefix(req["name"].(string), "faas-cli@") {
				http.Error(w, `{"error":{"code":"invalid","message":"bad body"}}`, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			json.NewEncoder(w).Encode(map[string]any{"id": "0b6a1c2e-0000-4000-8000-000000000001", "name": req["name"], "secret": secret, "created_at": "2026-11-22T08:00:00Z"})
		case r.Method == http.MethodDelete && r.URL.Path == "/api/v1/tokens/0b6a1c2e-0000-4000-8000-000000000001":
			revoked = r.Header.Get("Authorization") == "Bearer "+secret
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer reg.Close()
	dir := filepath.Join(t.TempDir(), "faas")
	cfg := filepath.Join(dir, "config.json")
	t.Setenv("FAAS_CONFIG", cfg)

	out, errOut, code := run(t, "pw d\n", "login", reg.URL, "-u", "alice", "--password-stdin")
	if code != 0 || !strings.Contains(out, "logged in to "+reg.URL+" as alice") {
		t.Fatalf("login: exit %d: %s%s", code, out, errOut)
	}
	if strings.Contains(out+errOut, secret) {
		t.Fatal("login printed the token")
	}
	st, err := os.Stat(cfg)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("config: %v, %v", st.Mode(), err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("config dir: %v, %v", st.Mode(), err)
	}
	var c config
	b, _ := os.ReadFile(cfg)
	if err := json.Unmarshal(b, &c); err != nil || c.Token != secret || c.User != "alice" || c.Registry != reg.URL {
		t.Fatalf("config %s: %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left over files: %v", ents)
	}

	// The agent commands send the stored token.
	if _, errOut, code := run(t, "", "status"); code != 0 {
		t.Fatalf("status: exit %d: %s", code, errOut)
	}
	if h := a.AuthHeaders(); len(h) == 0 || h[len(h)-1] != "Bearer "+secret {
		t.Fatalf("Authorization %q", h)
	}

	// Wrong password: exit 3, and the old login stays.
	if _, errOut, code := run(t, "wrong\n", "login", reg.URL, "-u", "alice", "--password-stdin"); code != 3 || !strings.Contains(errOut, "bad credentials") {
		t.Fatalf("wrong password: exit %d: %s", code, errOut)
	}
	if _, _, code := run(t, "pw d\n", "login", reg.URL, "-u", "alice"); code != 2 {
		t.Fatalf("without --password-stdin: exit %d", code)
	}
	if _, _, code := run(t, "pw d\n", "login", "http://192.0.2.1:5000", "-u", "alice", "--password-stdin"); code != 2 {
		t.Fatalf("plain http to another host: exit %d", code)
	}

	out, errOut, code = run(t, "", "logout")
	if code != 0 || !revoked || !strings.Contains(out, "logged out") {
		t.Fatalf("logout: exit %d, revoked %v: %s%s", code, revoked, out, errOut)
	}
	if _, err := os.Stat(cfg); !os.IsNotExist(err) {
		t.Fatalf("config after logout: %v", err)
	}
	if out, _, code := run(t, "", "logout"); code != 0 || out != "not logged in\n" {
		t.Fatalf("second logout: exit %d: %q", code, out)
	}
}
