package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
)

func TestServeTrustedProxiesFlag(t *testing.T) {
	var out strings.Builder
	root := newRoot(strings.NewReader(""), &out, io.Discard)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"--trusted-proxies", "FAAS_TRUSTED_PROXIES", "--password-hash-memory"} {
		if !strings.Contains(out.String(), f) {
			t.Errorf("serve --help lacks %s", f)
		}
	}
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--trusted-proxies", "10.0.0.0/8,bogus"}, "", `--trusted-proxies: clientip: invalid network: "bogus"`},
		{nil, "10.0.0.0/33", `--trusted-proxies: clientip: invalid network: "10.0.0.0/33"`},
		{[]string{"--password-hash-memory", "-1"}, "", "--password-hash-memory -1"},
	} {
		t.Setenv("FAAS_TRUSTED_PROXIES", c.env)
		root := newRoot(strings.NewReader(""), io.Discard, io.Discard)
		root.SetArgs(append([]string{"serve", "--database-url", "postgres://x"}, c.args...))
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %q: %v, want an error with %q", c.args, c.env, err, c.want)
		}
	}
}

// TestServeTrustedProxies: with --trusted-proxies the request log names the
// client a proxy forwards, and the proxy as peer.
func TestServeTrustedProxies(t *testing.T) {
	t.Setenv("FAAS_TRUSTED_PROXIES", "")
	pg := testenv.Postgres(t)
	pr, pw := io.Pipe()
	logs := &lockedBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		root := newRoot(strings.NewReader(""), pw, logs)
		root.SetArgs([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--database-url", pg.URL, "--data-dir", t.TempDir(),
			"--trusted-proxies", "127.0.0.0/8, 10.0.0.0/8"})
		err := root.ExecuteContext(ctx)
		pw.CloseWithError(err)
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no address line: %v", err)
	}
	url, _ := strings.CutPrefix(strings.TrimSpace(line), "registry listening on ")
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	req, _ := http.NewRequest(http.MethodGet, url+"/healthz", nil)
	req.Header.Set("X-Forwarded-For", "203.0.113.9, 10.1.1.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("serve did not stop")
	}
	if l := logs.String(); !strings.Contains(l, `"remote":"203.0.113.9"`) || !strings.Contains(l, `"peer":"127.0.0.1:`) {
		t.Fatalf("request log without the forwarded client:\n%s", l)
	}
}
