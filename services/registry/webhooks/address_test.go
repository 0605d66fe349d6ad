package webhooks

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"
)

// TestClientRefusesAndDoesNotFollow: the client of deliveries refuses a
// loopback peer unless allowed, whatever name led there, and answers a
// redirect with the redirect instead of following it.
func TestClientRefusesAndDoesNotFollow(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}
	}))
	defer srv.Close()
	_, err := newClient(time.Second, false).Get(srv.URL + "/in")
	if !errors.Is(err, ErrAddress) || hits.Load() != 0 {
		t.Fatalf("loopback peer: %v, %d hits", err, hits.Load())
	}
	resp, err := newClient(time.Second, true).Get(srv.URL + "/redirect")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || hits.Load() != 1 {
		t.Fatalf("redirect: %d, %d hits", resp.StatusCode, hits.Load())
	}
}

// TestErrorText: what a receiver puts in its status line reaches the
// delivery log as valid UTF-8 of bounded length.
func TestErrorText(t *testing.T) {
	for _, in := range []string{"500 \xffbad", strings.Repeat("é", 400), strings.Repeat("x", 511) + "é"} {
		out := errorText(in)
		if !utf8.ValidString(out) || len(out) > maxErrorLen {
			t.Errorf("%q: %q", in, out)
		}
	}
	if got := errorText("502 Bad Gateway"); got != "502 Bad Gateway" {
		t.Errorf("changed a plain status: %q", got)
	}
}
