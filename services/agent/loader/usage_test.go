package loader_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/api"
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
	a.client.QueueUsage(a.node.ID, []api.UsageRecord{{ReportID: reportID, TenantID: rec.TenantID, GrantID: rec.GrantID,
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
