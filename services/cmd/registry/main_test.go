package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

func TestUsersAddAndServe(t *testing.T) {
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	ctx := context.Background()
	common := []string{"--database-url", pg.URL, "--data-dir", dir}

	add := func(name, role, stdin string, extra ...string) (string, error) {
		var out strings.Builder
		root := newRoot(strings.NewReader(stdin), &out, io.Discard)
		root.SetArgs(append(append([]string{"users", "add", name, "--role", role}, common...), extra...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	if out, err := add("isv1", "isv", "pw-of-isv1\n"); err != nil || !strings.Contains(out, "created isv account isv1") {
		t.Fatalf("users add: %q %v", out, err)
	}
	if _, err := add("isv1", "isv", "again\n"); !errors.Is(err, auth.ErrExists) {
		t.Errorf("duplicate: %v", err)
	}
	pwFile := filepath.Join(dir, "password")
	if err := os.WriteFile(pwFile, []byte("pw-of-node1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 { // --if-absent: the second run finds it and succeeds
		out, err := add("node1", "node", "", "--password-file", pwFile, "--if-absent")
		if err != nil || !strings.Contains(out, "node1") {
			t.Fatalf("users add --password-file --if-absent: %q %v", out, err)
		}
	}
	if _, err := add("isv1", "tenant", "", "--password-file", pwFile, "--if-absent"); err != nil {
		t.Errorf("--if-absent on an existing account: %v", err)
	}
	tokFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokFile, []byte("faas_short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := add("shares", "tenant", "", "--password-file", pwFile, "--token-file", tokFile); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("a malformed --token-file: %v", err)
	}
	const token = "faas_dev-only-shares-token-published-in-the-rep0"
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := add("shares", "tenant", "", "--password-file", pwFile, "--token-file", tokFile); err != nil || !strings.Contains(out, "with API token") {
		t.Fatalf("users add --token-file: %q %v", out, err)
	}
	if _, err := add("x1", "boss", "pw\n"); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("bad role: %v", err)
	}
	if _, err := add("x2", "tenant", ""); err == nil {
		t.Error("empty password accepted")
	}

	pr, pw := io.Pipe()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(strings.NewReader(""), pw, io.Discard)
		root.SetArgs(append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0"}, common...))
		err := root.ExecuteContext(sctx)
		pw.CloseWithError(err)
		done <- err
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v", err)
	}
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "registry listening on ")
	if !ok {
		t.Fatalf("address line %q", line)
	}
	line, err = br.ReadString('\n')
	if err != nil {
		t.Fatalf("no metrics line: %v", err)
	}
	metrics, ok := strings.CutPrefix(strings.TrimSpace(line), "registry metrics on http://127.0.0.1:")
	if !ok || !strings.HasSuffix(metrics, "/metrics") {
		t.Fatalf("metrics line %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, br) }()
	for u, want := range map[string]int{url + "/metrics": 404, "http://127.0.0.1:" + metrics: 200} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", u, resp.StatusCode, want)
		}
	}
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("readyz: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url+"/auth/token?service=faas-registry&scope=repository:isv1/a:push", nil)
	req.SetBasicAuth("isv1", "pw-of-isv1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("token: %d", resp.StatusCode)
	}
	rc, err := registryclient.New(url, registryclient.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	if me, err := rc.Me(ctx); err != nil || me.Name != "shares" {
		t.Errorf("the token of --token-file: %+v, %v; want the shares account", me, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v after shutdown", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
}

func TestServeRedirectSettings(t *testing.T) {
	var out strings.Builder
	root := newRoot(strings.NewReader(""), &out, io.Discard)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--s3-redirect", "FAAS_S3_REDIRECT", "--s3-public-endpoint", "FAAS_S3_PUBLIC_ENDPOINT", "--s3-redirect-expiry", "--metrics-listen", "FAAS_METRICS_LISTEN", "127.0.0.1:5001"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("serve --help lacks %s", f)
		}
	}
	t.Setenv("FAAS_S3_REDIRECT", "yes please")
	root = newRoot(strings.NewReader(""), io.Discard, io.Discard)
	root.SetArgs([]string{"serve", "--database-url", "postgres://x"})
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "FAAS_S3_REDIRECT") {
		t.Errorf("unparsable FAAS_S3_REDIRECT: %v", err)
	}
}
