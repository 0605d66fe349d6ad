package loader_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/regclient"
)

// lockedBuffer is a log sink the client's sender goroutine and the test
// share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestUsageKeptWhileDatabaseDown stops the registry's PostgreSQL under a
// node that has loaded a slot: the registry answers the node's usage
// report 503 (the database is unreachable), and the node keeps its slot
// and the report, and delivers it once the database is back.
func TestUsageKeptWhileDatabaseDown(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 1})
	logs := &lockedBuffer{}
	a.client.WithLogger(slog.New(slog.NewTextHandler(logs, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := a.load("alice", f.loop.ref, intp(0)); err != nil {
		t.Fatal(err)
	}
	if err := a.client.FlushUsage(ctx); err != nil {
		t.Fatalf("the load's usage: %v", err)
	}
	rec := a.table.Record(0)
	if rec.GrantID == "" || rec.TenantID == "" || rec.Image == nil {
		t.Fatalf("slot 0 after the load: %+v", rec)
	}

	f.reg.pg.Stop(t)
	slot, digest, started, ended := 0, rec.Image.Digest, rec.LoadedAt, time.Now().UTC()
	const reportID = "test-clear/0"
	a.client.QueueUsage(a.node.ID, []registryapi.UsageRecord{{ReportID: reportID, TenantID: rec.TenantID, GrantID: rec.GrantID,
		ManifestDigest: &digest, Slot: &slot, Event: "clear", StartedAt: &started, EndedAt: &ended}})
	// The first attempt fails (logged), and the report stays.
	for !strings.Contains(logs.String(), "kept to send again") {
		select {
		case <-ctx.Done():
			t.Fatalf("no failed attempt logged while the database is down:\n%s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(logs.String(), "the database is unreachable") {
		t.Errorf("the failure does not say why:\n%s", logs.String())
	}
	if n := a.client.PendingUsage(); n != 1 {
		t.Errorf("pending usage while the database is down: %d, want 1", n)
	}
	if st := a.states(); st[0].Digest != f.loop.digest {
		t.Errorf("slot 0 while the database is down: %+v, want it still loaded", st[0])
	}

	f.reg.pg.Start(t)
	if err := a.client.FlushUsage(ctx); err != nil {
		t.Fatalf("usage after the database came back: %v (pending %d)\n%s", err, a.client.PendingUsage(), logs.String())
	}
	var n int
	if err := f.reg.srv.Pool().QueryRow(ctx, `select count(*) from usage_records where report_id = $1`, reportID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("usage records of the kept report in the registry: %d, want 1\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), "refused") {
		t.Errorf("a report was refused:\n%s", logs.String())
	}
}

// cutTransport is a node's network that can be cut for good: what a
// process killed mid-retry looks like to the registry.
type cutTransport struct{ cut atomic.Bool }

func (c *cutTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("the process is gone")
	}
	return http.DefaultTransport.RoundTrip(r)
}

// TestUsageSpooledAcrossRestart: a usage report the registry could not
// take (its database down) outlives the faasd that queued it: the next
// run finds it in the spool and delivers it, once.
func TestUsageSpooledAcrossRestart(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := a.load("alice", f.loop.ref, intp(0)); err != nil {
		t.Fatal(err)
	}
	rec := a.table.Record(0)
	spool := t.TempDir()

	link := &cutTransport{}
	first, err := regclient.New(f.reg.url, "node1", f.reg.tokens["node1"], &http.Client{Transport: link, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.SpoolUsage(spool); err != nil {
		t.Fatal(err)
	}
	f.reg.pg.Stop(t)
	slot, digest, started, ended := 0, rec.Image.Digest, rec.LoadedAt, time.Now().UTC()
	const reportID = "test-spooled-clear/0"
	first.QueueUsage(a.node.ID, []registryapi.UsageRecord{{ReportID: reportID, TenantID: rec.TenantID, GrantID: rec.GrantID,
		ManifestDigest: &digest, Slot: &slot, Event: "clear", StartedAt: &started, EndedAt: &ended}})
	// The sender spools a report before its first attempt.
	for files, _ := filepath.Glob(filepath.Join(spool, "*")); len(files) != 1; files, _ = filepath.Glob(filepath.Join(spool, "*")) {
		select {
		case <-ctx.Done():
			t.Fatalf("spool after the report was queued: %v, want one file", files)
		case <-time.After(10 * time.Millisecond):
		}
	}
	link.cut.Store(true) // faasd killed: the first client never sends again

	f.reg.pg.Start(t)
	next, err := regclient.New(f.reg.url, "node1", f.reg.tokens["node1"], nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.SpoolUsage(spool); err != nil {
		t.Fatal(err)
	}
	if n := next.PendingUsage(); n != 1 {
		t.Errorf("the restarted client's pending usage: %d, want the spooled report's 1", n)
	}
	if err := next.FlushUsage(ctx); err != nil {
		t.Fatalf("delivering the spooled report: %v", err)
	}
	var n int
	if err := f.reg.srv.Pool().QueryRow(ctx, `select count(*) from usage_records where report_id = $1`, reportID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("usage records of the spooled report in the registry: %d, want 1", n)
	}
	if files, _ := filepath.Glob(filepath.Join(spool, "*")); len(files) != 0 {
		t.Errorf("spool after delivery: %v, want empty", files)
	}
}
