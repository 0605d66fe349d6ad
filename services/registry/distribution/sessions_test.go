package distribution_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// streamed sends a PATCH whose body has no declared length.
func (c client) streamed(loc string, p []byte, header ...string) response {
	c.t.Helper()
	req, err := http.NewRequest("PATCH", c.base+loc, io.MultiReader(bytes.NewReader(p)))
	if err != nil {
		c.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp, b}
}

// TestUploadSessionLimits: an account has at most MaxUploadSessions open
// sessions and MaxStagedBytes staged in them (429 TOOMANYREQUESTS beyond,
// keeping what fit); other accounts are not affected, and finishing or
// cancelling uploads makes room.
func TestUploadSessionLimits(t *testing.T) {
	base := serve(t, distribution.Config{Meta: newMetaWithAccounts(t, "a", "b"), Blobs: newDirStore(t), Authorizer: grants{},
		MaxUploadSessions: 3, MaxStagedBytes: 1000})
	c := client{t, base}
	a, b := []string{"X-Test-Account", "a"}, []string{"X-Test-Account", "b"}
	var locs []string
	for range 3 {
		locs = append(locs, c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location"))
	}
	c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 429, "TOOMANYREQUESTS").header(t, "Retry-After", "10")
	p := []byte("monolithic")
	c.do("POST", "/v2/a/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p, a...).want(t, 429, "TOOMANYREQUESTS")
	c.do("POST", "/v2/a/other/blobs/uploads/", nil, a...).want(t, 429, "TOOMANYREQUESTS") // per account, not per repository
	c.do("POST", "/v2/a/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p, b...).want(t, 201, "")
	c.do("DELETE", locs[0], nil, a...).want(t, 204, "")
	locs[0] = c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location")

	// Staged bytes: 600 fit, 600 more do not (refused up front when the
	// length is declared, cut at the limit when not).
	six := bytes.Repeat([]byte("6"), 600)
	c.do("PATCH", locs[1], six, a...).want(t, 202, "").header(t, "Range", "0-599")
	c.do("PATCH", locs[2], six, a...).want(t, 429, "TOOMANYREQUESTS")
	c.do("GET", locs[2], nil, a...).want(t, 204, "").header(t, "Range", "0-0")
	c.streamed(locs[2], six, a...).want(t, 429, "TOOMANYREQUESTS")
	c.do("GET", locs[2], nil, a...).want(t, 204, "").header(t, "Range", "0-399")
	c.do("PATCH", locs[0], []byte("x"), a...).want(t, 429, "TOOMANYREQUESTS")
	// b has room of its own.
	lb := c.do("POST", "/v2/a/img/blobs/uploads/", nil, b...).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", lb, six, b...).want(t, 202, "")
	// Committing (a PUT without a body needs no room) frees a's bytes.
	c.do("PUT", locs[1]+"?digest="+string(blob.FromBytes(six)), nil, a...).want(t, 201, "")
	c.do("PATCH", locs[0], six, a...).want(t, 202, "")
}

// TestUploadExpiryAndSweep: a session idle for longer than
// UploadIdleTimeout is unknown, and SweepUploads removes it with its
// staging; it also removes staging no session names once it is older than
// a minute (a monolithic upload killed mid-body); it leaves alone fresh
// staging, live sessions, and sessions this process is writing to however
// old their row looks (and marks them active).
func TestUploadExpiryAndSweep(t *testing.T) {
	ctx := context.Background()
	pool := accountsDB(t, "a")
	dir := t.TempDir()
	bs, err := dirstore.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := distribution.New(distribution.Config{Meta: meta.New(pool), Blobs: bs, Authorizer: grants{}, MinBodyRate: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	c := client{t, srv.URL}
	a := []string{"X-Test-Account", "a"}
	age := func(loc string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `update upload_sessions set updated_at = now() - interval '2 hours' where id = $1`, uploadID(loc)); err != nil {
			t.Fatal(err)
		}
	}
	staged := func() []string {
		t.Helper()
		var ids []string
		if err := bs.Uploads(ctx, func(u blob.UploadInfo) error { ids = append(ids, u.ID); return nil }); err != nil {
			t.Fatal(err)
		}
		return ids
	}

	// An idle session: unknown at once, removed by the sweep.
	idle := c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", idle, []byte("abc"), a...).want(t, 202, "")
	age(idle)
	c.do("GET", idle, nil, a...).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
	c.do("PATCH", idle, []byte("d"), a...).want(t, 404, "BLOB_UPLOAD_UNKNOWN")
	c.do("DELETE", idle, nil, a...).want(t, 404, "BLOB_UPLOAD_UNKNOWN")

	// A session being written to, with a row as old.
	writing := c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location")
	tr := startTrickle(t, "PATCH", srv.URL+writing, 20*time.Millisecond, a...)
	stagedOf(t, bs, uploadID(writing))
	age(writing)

	// A live session.
	live := c.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location")
	c.do("PATCH", live, []byte("xyz"), a...).want(t, 202, "")

	// Staging without a session: an old one and a fresh one.
	orphan := func(old bool) string {
		up, err := bs.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := up.Write(ctx, bytes.NewReader([]byte("partial"))); err != nil {
			t.Fatal(err)
		}
		if old {
			then := time.Now().Add(-5 * time.Minute)
			if err := os.Chtimes(filepath.Join(dir, "uploads", up.ID(), "data"), then, then); err != nil {
				t.Fatal(err)
			}
		}
		return up.ID()
	}
	oldOrphan, freshOrphan := orphan(true), orphan(false)

	res, err := h.SweepUploads(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Expired != 1 || res.Orphans != 1 || res.FreedBytes != int64(len("abc")+len("partial")) {
		t.Errorf("SweepUploads = %+v, want 1 expired and 1 orphan of 10 bytes", res)
	}
	left := staged()
	for _, id := range []string{uploadID(writing), uploadID(live), freshOrphan} {
		if !slices.Contains(left, id) {
			t.Errorf("staging %s was removed", id)
		}
	}
	for _, id := range []string{uploadID(idle), oldOrphan} {
		if slices.Contains(left, id) {
			t.Errorf("staging %s was left", id)
		}
	}
	// The session being written to was marked active, not expired.
	if !tr.running() {
		t.Fatal("the trickling PATCH ended")
	}
	c.do("GET", writing, nil, a...).want(t, 204, "")
	c.do("GET", live, nil, a...).want(t, 204, "").header(t, "Range", "0-2")
	// A second sweep finds nothing.
	if res, err := h.SweepUploads(ctx); err != nil || res != (distribution.SweepResult{}) {
		t.Errorf("second SweepUploads = %+v, %v", res, err)
	}
}
