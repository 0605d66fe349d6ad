package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/server"
)

// call sends a request with a bearer token and returns the response with
// its body read; it fails the test when there is no answer within a
// (generous) minute.
func call(t *testing.T, base, token, method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestUploadStatusTokens: a client that keeps one token for GET and HEAD
// (pull) and one for POST, PATCH and PUT (push), as the distribution-spec
// conformance suite does, reads the status of its chunked upload with its
// pull token; the push token works too. It used to answer 403; so did
// cancelling with its token for DELETE (delete).
func TestUploadStatusTokens(t *testing.T) {
	r := start(t, server.Config{})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	const repo = "isv1/img"
	pull := bearerToken(t, r.url, "isv1", isvPW, "repository:"+repo+":pull")
	push := bearerToken(t, r.url, "isv1", isvPW, "repository:"+repo+":push")

	p := []byte("chunked upload")
	if resp, _ := call(t, r.url, pull, "HEAD", "/v2/"+repo+"/blobs/"+string(blob.FromBytes(p)), nil); resp.StatusCode != 404 {
		t.Fatalf("HEAD blob: %d", resp.StatusCode)
	}
	resp, b := call(t, r.url, push, "POST", "/v2/"+repo+"/blobs/uploads/", nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != 202 || loc == "" {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	if resp, b := call(t, r.url, push, "PATCH", loc, p[:5], "Content-Range", "0-4"); resp.StatusCode != 202 {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, b)
	}
	for name, tok := range map[string]string{"pull": pull, "push": push} {
		resp, b := call(t, r.url, tok, "GET", loc, nil)
		if resp.StatusCode != 204 || resp.Header.Get("Range") != "0-4" {
			t.Errorf("GET status with the %s token: %d, Range %q, %s", name, resp.StatusCode, resp.Header.Get("Range"), b)
		}
	}
	if resp, b := call(t, r.url, push, "PUT", loc+"?digest="+string(blob.FromBytes(p)), p[5:], "Content-Range", "5-13"); resp.StatusCode != 201 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, b)
	}
	// Its token for DELETE holds delete, as a blob delete asked for.
	del := bearerToken(t, r.url, "isv1", isvPW, "repository:"+repo+":delete")
	resp, b = call(t, r.url, push, "POST", "/v2/"+repo+"/blobs/uploads/", nil)
	if resp.StatusCode != 202 {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	if resp, b := call(t, r.url, del, "DELETE", resp.Header.Get("Location"), nil); resp.StatusCode != 204 {
		t.Errorf("DELETE upload with the delete token: %d %s", resp.StatusCode, b)
	}
}

// trickle is a request whose body arrives a byte every tick until the
// server stops reading or the test ends.
type trickle struct {
	done chan struct{}
	code int   // the answer, once done; 0 when the request failed
	err  error // the request's error, once done
}

// startTrickle sends method url with a body of declared length n that
// trickles in.
func startTrickle(t *testing.T, method, url, token string, n int64, tick time.Duration) *trickle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, method, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = n
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/octet-stream")
	tr := &trickle{done: make(chan struct{})}
	go func() {
		tk := time.NewTicker(tick)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				pw.CloseWithError(ctx.Err())
				return
			case <-tk.C:
			}
			if _, err := pw.Write([]byte{'x'}); err != nil {
				return
			}
		}
	}()
	go func() {
		defer close(tr.done)
		resp, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			tr.err = err
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		tr.code = resp.StatusCode
	}()
	t.Cleanup(func() { cancel(); <-tr.done })
	return tr
}

// running reports whether the request is still in progress.
func (tr *trickle) running() bool {
	select {
	case <-tr.done:
		return false
	default:
		return true
	}
}

// TestSlowUploadBodies: one ISV trickling the bodies of several chunked
// uploads holds no database connection, so that with a pool of three
// connections other accounts still get tokens, use the REST API and push,
// and the registry stays ready; its extra uploads answer 429; and the
// trickling bodies are cut for being slower than the minimum rate, keeping
// what arrived. Before, every PATCH held a connection (a transaction on
// the session row) while its body arrived.
func TestSlowUploadBodies(t *testing.T) {
	pg := testenv.Postgres(t)
	const window = 10 * time.Second
	r := start(t, server.Config{DatabaseURL: pg.URL + "&pool_max_conns=3",
		MinBodyRate: 1 << 10, MinBodyRateWindow: window, MaxConcurrentUploads: 4})
	r.user(t, "slow", auth.RoleISV, isvPW)
	r.user(t, "other", auth.RoleISV, isvPW+"2")
	slow := bearerToken(t, r.url, "slow", isvPW, "repository:slow/img:pull,push")

	// Four trickling PATCHes, each on its own session, reading a byte every
	// 100 ms: far below 1 KiB/s.
	var locs []string
	var trickles []*trickle
	for range 4 {
		resp, b := call(t, r.url, slow, "POST", "/v2/slow/img/blobs/uploads/", nil)
		if resp.StatusCode != 202 {
			t.Fatalf("POST: %d %s", resp.StatusCode, b)
		}
		loc := resp.Header.Get("Location")
		locs = append(locs, loc)
		trickles = append(trickles, startTrickle(t, "PATCH", r.url+loc, slow, 1<<20, 100*time.Millisecond))
	}
	// Wait until the registry reads every body: the status shows bytes.
	deadline := time.Now().Add(time.Minute)
	for _, loc := range locs {
		for {
			resp, _ := call(t, r.url, slow, "GET", loc, nil)
			if resp.StatusCode == 204 && resp.Header.Get("Range") != "0-0" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the registry does not read the trickling body of %s: %d %q", loc, resp.StatusCode, resp.Header.Get("Range"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// A fifth upload body of the same account is refused for now.
	resp, b := call(t, r.url, slow, "POST", "/v2/slow/img/blobs/uploads/?digest="+string(blob.FromBytes([]byte("five"))), []byte("five"))
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "TOOMANYREQUESTS") {
		t.Errorf("fifth upload: %d, Retry-After %q, %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}

	// Everyone else is served meanwhile (within generous deadlines).
	c := &http.Client{Timeout: 30 * time.Second}
	check := func(what string, req *http.Request, want int) {
		t.Helper()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("%s while uploads trickle: %v", what, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s while uploads trickle: %d %s", what, resp.StatusCode, b)
		}
	}
	req, _ := http.NewRequest("GET", r.url+"/readyz", nil)
	check("/readyz", req, 200)
	other := bearerToken(t, r.url, "other", isvPW+"2", "repository:other/img:pull,push")
	req, _ = http.NewRequest("GET", r.url+"/api/v1/me", nil)
	req.SetBasicAuth("other", isvPW+"2")
	check("/api/v1/me", req, 200)
	p := []byte("another account's blob")
	d := string(blob.FromBytes(p))
	req, _ = http.NewRequest("POST", r.url+"/v2/other/img/blobs/uploads/?digest="+d, bytes.NewReader(p))
	req.Header.Set("Authorization", "Bearer "+other)
	check("monolithic push", req, 201)
	req, _ = http.NewRequest("GET", r.url+"/v2/other/img/blobs/"+d, nil)
	req.Header.Set("Authorization", "Bearer "+other)
	check("pull", req, 200)
	req, _ = http.NewRequest("GET", r.url+"/readyz", nil)
	check("/readyz", req, 200)
	for i, tr := range trickles {
		if !tr.running() {
			t.Errorf("trickle %d ended before the other requests were done: %d %v", i, tr.code, tr.err)
		}
	}

	// The trickles are cut: after a window of too few bytes, with 408 (or
	// the connection closed under the body).
	for i, tr := range trickles {
		select {
		case <-tr.done:
		case <-time.After(3*window + time.Minute):
			t.Fatalf("trickle %d was not cut", i)
		}
		if tr.code != http.StatusRequestTimeout && tr.err == nil {
			t.Errorf("trickle %d: %d, want 408", i, tr.code)
		}
	}
	// What arrived is staged, and the upload goes on from there.
	resp, _ = call(t, r.url, slow, "GET", locs[0], nil)
	var last int
	if _, err := fmt.Sscanf(resp.Header.Get("Range"), "0-%d", &last); resp.StatusCode != 204 || err != nil || last < 1 {
		t.Fatalf("status after the cut: %d %q", resp.StatusCode, resp.Header.Get("Range"))
	}
	staged := bytes.Repeat([]byte{'x'}, last+1)
	rest := []byte("and the rest")
	full := append(staged, rest...)
	if resp, b := call(t, r.url, slow, "PUT", locs[0]+"?digest="+string(blob.FromBytes(full)), rest,
		"Content-Range", fmt.Sprintf("%d-%d", len(staged), len(full)-1)); resp.StatusCode != 201 {
		t.Fatalf("PUT after the cut: %d %s", resp.StatusCode, b)
	}
}

// TestUploadSweeps: Serve sweeps upload staging at start, removing what no
// session names (a monolithic upload killed mid-body in an earlier run),
// and then on its interval, removing expired sessions with their staging.
func TestUploadSweeps(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	bs, err := dirstore.New(filepath.Join(dataDir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	up, err := bs.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := up.Write(ctx, strings.NewReader("half a blob")); err != nil {
		t.Fatal(err)
	}
	then := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dataDir, "blobs", "uploads", up.ID(), "data"), then, then); err != nil {
		t.Fatal(err)
	}
	staged := func(id string) bool {
		t.Helper()
		var ids []string
		if err := bs.Uploads(ctx, func(u blob.UploadInfo) error { ids = append(ids, u.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, id)
	}
	waitGone := func(what, id string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for staged(id) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: staging %s is still there", what, id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	r := start(t, server.Config{DataDir: dataDir, UploadSweepInterval: 100 * time.Millisecond})
	waitGone("the sweep at start", up.ID())

	r.user(t, "isv1", auth.RoleISV, isvPW)
	tok := bearerToken(t, r.url, "isv1", isvPW, "repository:isv1/img:push")
	resp, b := call(t, r.url, tok, "POST", "/v2/isv1/img/blobs/uploads/", nil)
	if resp.StatusCode != 202 {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	loc := resp.Header.Get("Location")
	if resp, b := call(t, r.url, tok, "PATCH", loc, []byte("abc")); resp.StatusCode != 202 {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, b)
	}
	id := loc[strings.LastIndexByte(loc, '/')+1:]
	if _, err := r.srv.Pool().Exec(ctx, `update upload_sessions set updated_at = now() - interval '2 hours' where id = $1`, id); err != nil {
		t.Fatal(err)
	}
	waitGone("the periodic sweep", id)
	if resp, _ := call(t, r.url, tok, "GET", loc, nil); resp.StatusCode != 404 {
		t.Errorf("status of the expired upload: %d", resp.StatusCode)
	}
}
