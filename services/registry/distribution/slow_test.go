package distribution_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/distribution"
)

// trickle is a request whose body arrives a byte every tick until the
// server stops reading or the test ends.
type trickle struct {
	done chan struct{}
	code int    // the answer, once done; 0 when the request failed
	body []byte // its body
	err  error  // the request's error, once done
}

func startTrickle(t *testing.T, method, url string, tick time.Duration, header ...string) *trickle {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, method, url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = 1 << 20
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
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
		tr.body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		tr.code = resp.StatusCode
	}()
	t.Cleanup(func() { cancel(); <-tr.done })
	return tr
}

func (tr *trickle) running() bool {
	select {
	case <-tr.done:
		return false
	default:
		return true
	}
}

// wait waits (generously) for the request to end and checks that it was
// answered with status and code, or cut by a closed connection when
// status is 408.
func (tr *trickle) wait(t *testing.T, status int, code string) {
	t.Helper()
	select {
	case <-tr.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("a trickling request did not end")
	}
	if tr.err != nil && status == http.StatusRequestTimeout {
		return
	}
	if tr.code != status || !strings.Contains(string(tr.body), code) {
		t.Fatalf("trickling request: %d %s (%v), want %d %s", tr.code, tr.body, tr.err, status, code)
	}
}

// stagedOf waits until upload id of bs has staged data and returns its size.
func stagedOf(t *testing.T, bs blob.Store, id string) int64 {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var n int64
		if err := bs.Uploads(context.Background(), func(u blob.UploadInfo) error {
			if u.ID == id {
				n = u.Size
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("upload %s: nothing staged", id)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func uploadID(loc string) string { return loc[strings.LastIndexByte(loc, '/')+1:] }

// TestSlowBodies: bodies slower than MinBodyRate are cut (408) keeping
// what arrived; an account has at most MaxConcurrentUploads bodies in
// flight (429 and Retry-After beyond), without limiting other accounts; a
// second writer of an upload is refused (416).
func TestSlowBodies(t *testing.T) {
	bs := newDirStore(t)
	base := serve(t, distribution.Config{Meta: newMetaWithAccounts(t, "a", "b"), Blobs: bs, Authorizer: grants{},
		MinBodyRate: 1 << 10, MinBodyRateWindow: time.Second, MaxConcurrentUploads: 2})
	c := client{t, base}
	a, b := []string{"X-Test-Account", "a"}, []string{"X-Test-Account", "b"}
	var locs []string
	for range 3 {
		locs = append(locs, c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location"))
	}
	t1 := startTrickle(t, "PATCH", base+locs[0], 50*time.Millisecond, a...)
	t2 := startTrickle(t, "PATCH", base+locs[1], 50*time.Millisecond, a...)
	stagedOf(t, bs, uploadID(locs[0]))
	stagedOf(t, bs, uploadID(locs[1]))

	// a's third body waits; so does a monolithic one.
	r := c.do("PATCH", locs[2], []byte("abc"), a...).want(t, 429, "TOOMANYREQUESTS")
	r.header(t, "Retry-After", "10")
	p := []byte("monolithic")
	c.do("POST", "/v2/a/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p, a...).want(t, 429, "TOOMANYREQUESTS")
	// b is not limited by a's uploads.
	c.do("POST", "/v2/a/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p, b...).want(t, 201, "")
	// A second writer of an upload being written is refused.
	c.do("PATCH", locs[0], []byte("abc"), b...).want(t, 416, "RANGE_INVALID")
	// The status answers meanwhile, and shows what arrived so far.
	c.do("GET", locs[0], nil, a...).want(t, 204, "")
	if !t1.running() || !t2.running() {
		t.Fatal("a trickle ended early")
	}

	// Cut, with 408, keeping what arrived.
	t1.wait(t, 408, "BLOB_UPLOAD_INVALID")
	t2.wait(t, 408, "BLOB_UPLOAD_INVALID")
	n := stagedOf(t, bs, uploadID(locs[0]))
	r = c.do("GET", locs[0], nil, a...).want(t, 204, "")
	r.header(t, "Range", fmt.Sprintf("0-%d", n-1))
	// a may send bodies again, and finishes the upload from there.
	full := append(bytes.Repeat([]byte{'x'}, int(n)), "rest"...)
	c.do("PUT", locs[0]+"?digest="+string(blob.FromBytes(full)), full[n:], append(a, "Content-Range", fmt.Sprintf("%d-%d", n, len(full)-1))...).want(t, 201, "")
	c.do("PATCH", locs[2], []byte("abc"), a...).want(t, 202, "")

	// Slow manifests are cut too.
	tm := startTrickle(t, "PUT", base+"/v2/a/img/manifests/v1", 50*time.Millisecond, append(a, "Content-Type", ociManifest)...)
	tm.wait(t, 408, "MANIFEST_INVALID")
}

// TestConcurrentWritersAcrossReplicas: two registry processes (handlers)
// over one database and blob store; a PATCH on one while a PATCH of the
// same upload trickles on the other. The in-process claim cannot see it;
// the conditional update of the session's offset does: the later of the two
// to finish is refused (416), and the mixed content never becomes a blob.
func TestConcurrentWritersAcrossReplicas(t *testing.T) {
	bs := newDirStore(t)
	md := newMeta(t)
	cfg := distribution.Config{Meta: md, Blobs: bs, Authorizer: distribution.AllowAll{}, MinBodyRate: 1 << 10, MinBodyRateWindow: time.Second}
	base1, base2 := serve(t, cfg), serve(t, cfg)
	c1, c2 := client{t, base1}, client{t, base2}
	loc := c1.do("POST", "/v2/r/img/blobs/uploads/", nil).want(t, 202, "").Header.Get("Location")
	tr := startTrickle(t, "PATCH", base1+loc, 50*time.Millisecond)
	stagedOf(t, bs, uploadID(loc))
	p := []byte("the intended content")
	c2.do("PATCH", loc, p).want(t, 202, "")
	tr.wait(t, 416, "RANGE_INVALID")
	c2.do("PUT", loc+"?digest="+string(blob.FromBytes(p)), nil).want(t, 400, "DIGEST_INVALID")
	c2.do("GET", "/v2/r/img/blobs/"+string(blob.FromBytes(p)), nil).want(t, 404, "BLOB_UNKNOWN")
}
