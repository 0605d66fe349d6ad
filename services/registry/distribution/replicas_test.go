package distribution_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// replica serves the API with cfg as one process of several would, its
// upload leases renewed until the returned kill is called. kill stops the
// renewals only, as a crash would, without ending the requests in flight
// or cleaning anything up.
func replica(t *testing.T, cfg distribution.Config) (base string, kill func()) {
	t.Helper()
	h, err := distribution.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.RenewUploadLeases(ctx)
	}()
	srv := httptest.NewServer(h)
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return srv.URL, cancel
}

// dbNow is the database's clock, which leases are measured on.
func dbNow(t *testing.T, pool *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := pool.QueryRow(context.Background(), `select now()`).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now
}

// eventually polls f until it returns "" (generously), else fails with
// its last answer.
func eventually(t *testing.T, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		msg := f()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBodiesInFlightAcrossReplicas: two processes on one database hold
// an account to MaxConcurrentUploads bodies in flight together, not each;
// the limit keeps holding while the bodies outlive their first lease
// (renewed); once a process dies, its bodies stop counting after the
// lease.
func TestBodiesInFlightAcrossReplicas(t *testing.T) {
	pool := accountsDB(t, "a", "b")
	bs := newDirStore(t)
	const lease = 6 * time.Second
	cfg := distribution.Config{Blobs: bs, Authorizer: grants{}, MinBodyRate: -1,
		MaxConcurrentUploads: 2, UploadBodyLease: lease}
	cfg1, cfg2 := cfg, cfg
	cfg1.Meta, cfg2.Meta = meta.New(pool), meta.New(pool)
	base1, kill1 := replica(t, cfg1)
	base2, _ := replica(t, cfg2)
	c1, c2 := client{t, base1}, client{t, base2}
	a, b := []string{"X-Test-Account", "a"}, []string{"X-Test-Account", "b"}
	var locs []string
	for range 3 {
		locs = append(locs, c1.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location"))
	}
	// One body of a on each process.
	tr1 := startTrickle(t, "PATCH", base1+locs[0], 50*time.Millisecond, a...)
	tr2 := startTrickle(t, "PATCH", base2+locs[1], 50*time.Millisecond, a...)
	stagedOf(t, bs, uploadID(locs[0]))
	stagedOf(t, bs, uploadID(locs[1]))
	admitted := dbNow(t, pool)

	p := []byte("abc")
	mono := "/v2/a/img/blobs/uploads/?digest=" + string(blob.FromBytes(p))
	for _, c := range []client{c1, c2} {
		c.do("PATCH", locs[2], p, a...).want(t, 429, "TOOMANYREQUESTS").header(t, "Retry-After", "10")
		c.do("POST", mono, p, a...).want(t, 429, "TOOMANYREQUESTS")
		c.do("POST", "/v2/a/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p, b...).want(t, 201, "")
	}

	// Past the first lease of both bodies, renewals keep them counted.
	eventually(t, "the database clock to pass the first lease", func() string {
		if now := dbNow(t, pool); now.Before(admitted.Add(lease + time.Second)) {
			return fmt.Sprintf("now %v", now)
		}
		return ""
	})
	if !tr1.running() || !tr2.running() {
		t.Fatal("a trickle ended early")
	}
	c2.do("PATCH", locs[2], p, a...).want(t, 429, "TOOMANYREQUESTS")

	// Process 1 dies: its body still streams, but no longer counts once
	// its lease has passed.
	kill1()
	eventually(t, "a body on process 2 after process 1 died", func() string {
		r := c2.do("PATCH", locs[2], p, a...)
		if r.StatusCode != 202 {
			return fmt.Sprintf("%d %s", r.StatusCode, r.body)
		}
		return ""
	})
	if !tr1.running() {
		t.Fatal("the dead process's trickle ended: its body was not what made room")
	}
}

// TestStagedBytesAcrossReplicas: the bytes of a body in flight on one
// process count toward MaxStagedBytes on the other: a body of declared
// length that does not fit is refused up front, one without is cut where
// the room ends, keeping what fit; once the first process dies, its
// reservation is released after the lease.
func TestStagedBytesAcrossReplicas(t *testing.T) {
	pool := accountsDB(t, "a")
	bs := newDirStore(t)
	const lease = 3 * time.Second
	const limit = 3 << 19 // 1.5 MiB; a trickle declares 1 MiB
	cfg := distribution.Config{Blobs: bs, Authorizer: grants{}, MinBodyRate: -1,
		MaxStagedBytes: limit, UploadBodyLease: lease}
	cfg1, cfg2 := cfg, cfg
	cfg1.Meta, cfg2.Meta = meta.New(pool), meta.New(pool)
	base1, kill1 := replica(t, cfg1)
	base2, _ := replica(t, cfg2)
	c1, c2 := client{t, base1}, client{t, base2}
	a := []string{"X-Test-Account", "a"}
	var locs []string
	for range 3 {
		locs = append(locs, c1.do("POST", "/v2/a/img/blobs/uploads/", nil, a...).want(t, 202, "").Header.Get("Location"))
	}
	tr := startTrickle(t, "PATCH", base1+locs[0], 50*time.Millisecond, a...)
	stagedOf(t, bs, uploadID(locs[0]))

	big := bytes.Repeat([]byte("6"), 600<<10) // more than the 512 KiB left
	c2.do("PATCH", locs[1], big, a...).want(t, 429, "TOOMANYREQUESTS").header(t, "Retry-After", "10")
	c2.do("GET", locs[1], nil, a...).want(t, 204, "").header(t, "Range", "0-0")
	c2.streamed(locs[1], big, a...).want(t, 429, "TOOMANYREQUESTS")
	c2.do("GET", locs[1], nil, a...).want(t, 204, "").header(t, "Range", fmt.Sprintf("0-%d", limit-(1<<20)-1))

	// The room is used up (staged on locs[1], reserved on locs[0]).
	c2.do("PATCH", locs[2], []byte("x"), a...).want(t, 429, "TOOMANYREQUESTS")
	kill1()
	eventually(t, "room on process 2 after process 1 died", func() string {
		r := c2.do("PATCH", locs[2], big, a...)
		if r.StatusCode != 202 {
			return fmt.Sprintf("%d %s", r.StatusCode, r.body)
		}
		return ""
	})
	if !tr.running() {
		t.Fatal("the dead process's trickle ended: its body was not what made room")
	}
}
