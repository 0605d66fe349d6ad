package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/registry/api"
)

// TestAttachments drives the operator's attachment commands against a
// real database: list with its filters, show with the history, detach as
// the API's DELETE by an admin does (ended, usage closed, the node's
// revision past, audited), and detach of an ended or unknown attachment.
func TestAttachments(t *testing.T) {
	pg := testenv.Postgres(t)
	ctx := context.Background()
	common := []string{"--database-url", pg.URL, "--data-dir", t.TempDir()}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		root := newRoot(strings.NewReader("pw\n"), &out, io.Discard)
		root.SetArgs(append(args, common...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	for _, u := range [][2]string{{"node1", "node"}, {"alice", "tenant"}, {"bob", "tenant"}} {
		if _, err := run("users", "add", u[0], "--role", u[1]); err != nil {
			t.Fatal(err)
		}
	}
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	node := map[string]string{}
	for _, name := range []string{"fpga-07", "fpga-08"} {
		var id string
		if err := pool.QueryRow(ctx, `insert into nodes (account_id, name, public_key, last_heartbeat_at) select id, $1, 'PEM', now()
			from accounts where name = 'node1' returning id::text`, name).Scan(&id); err != nil {
			t.Fatal(err)
		}
		node[name] = id
	}
	// Attachments as the API makes them: alice's live one on fpga-07 with
	// its usage record and audit row, bob's failed one on fpga-08.
	attach := func(tenant, nodeName, state string, slot int) string {
		t.Helper()
		var id string
		if err := pool.QueryRow(ctx, `insert into attachments (tenant_id, version, repository, manifest_digest, node_id, slot, state,
			credential_hash, lease_seconds, lease_expires_at, ended_at)
			select a.id, '1', 'acme/mnist', 'sha256:00', $2::uuid, $3, $4, sha256('x'), 30, now() + interval '30 seconds',
				case when $4 in ('pending', 'loading', 'ready') then null else now() end
			from accounts a where a.name = $1 returning id::text`, tenant, node[nodeName], slot, state).Scan(&id); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `insert into usage_records (node_id, tenant_id, manifest_digest, slot, event, started_at, attachment_id)
			select $2::uuid, a.id, 'sha256:00', $3, 'attach', now(), $4::uuid from accounts a where a.name = $1`, tenant, node[nodeName], slot, id); err != nil {
			t.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `insert into audit_log (actor_name, action, target_type, target_id, details)
			values ($1, 'attachment.create', 'attachment', $2, '{"slot": 0}')`, tenant, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	live := attach("alice", "fpga-07", "ready", 0)
	failed := attach("bob", "fpga-08", "failed", 1)

	list := func(args ...string) []string {
		t.Helper()
		out, err := run(append([]string{"attachments", "list", "--json"}, args...)...)
		if err != nil {
			t.Fatalf("attachments list %q: %v", args, err)
		}
		var as []poolapi.Attachment
		if err := json.Unmarshal([]byte(out), &as); err != nil {
			t.Fatalf("attachments list --json: %q %v", out, err)
		}
		var ids []string
		for _, a := range as {
			ids = append(ids, a.ID)
		}
		return ids
	}
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, []string{failed, live}},
		{[]string{"--state", "live"}, []string{live}},
		{[]string{"--state", "failed"}, []string{failed}},
		{[]string{"--node", "fpga-07"}, []string{live}},
		{[]string{"--node", node["fpga-08"]}, []string{failed}},
		{[]string{"--tenant", "bob"}, []string{failed}},
		{[]string{"--tenant", "bob", "--state", "ready"}, nil},
		{[]string{"--limit", "1"}, []string{failed}},
	} {
		if got := list(c.args...); strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("list %q: %q, want %q", c.args, got, c.want)
		}
	}
	if _, err := run("attachments", "list", "--state", "gone"); err == nil {
		t.Error("list --state gone: no error")
	}
	if out, err := run("attachments", "list"); err != nil || !strings.Contains(out, live) || !strings.Contains(out, "fpga-07") ||
		!strings.Contains(out, "alice") {
		t.Fatalf("attachments list: %q %v", out, err)
	}

	// detach ends it as the API would; the history shows it.
	var rev int64
	if err := pool.QueryRow(ctx, `select revision from attachments where id = $1::uuid`, live).Scan(&rev); err != nil {
		t.Fatal(err)
	}
	out, err := run("attachments", "detach", live)
	if err != nil || !strings.Contains(out, live+" detached") {
		t.Fatalf("attachments detach: %q %v", out, err)
	}
	var state string
	var rev2 int64
	var usageOpen bool
	if err := pool.QueryRow(ctx, `select a.state, a.revision, exists (select 1 from usage_records u where u.attachment_id = a.id and u.ended_at is null)
		from attachments a where a.id = $1::uuid`, live).Scan(&state, &rev2, &usageOpen); err != nil {
		t.Fatal(err)
	}
	if state != "detached" || rev2 <= rev || usageOpen {
		t.Fatalf("after detach: state %s, revision %d (was %d), usage open %v", state, rev2, rev, usageOpen)
	}
	out, err = run("attachments", "show", live, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var h api.AttachmentHistory
	if err := json.Unmarshal([]byte(out), &h); err != nil {
		t.Fatalf("show --json: %q %v", out, err)
	}
	if h.ID != live || h.State != poolapi.Detached || h.Tenant != "alice" || len(h.History) != 2 || h.History[0].Action != "attachment.create" ||
		h.History[1].Action != "attachment.detach" || !strings.HasPrefix(h.History[1].ActorName, "cli") || h.History[1].ActorID != nil {
		t.Fatalf("show: %+v", h)
	}
	if out, err := run("attachments", "show", live); err != nil || !strings.Contains(out, "attachment.detach") || !strings.Contains(out, "detached") {
		t.Fatalf("attachments show: %q %v", out, err)
	}

	// Detaching an ended attachment changes nothing, and says so.
	for _, id := range []string{live, failed} {
		out, err := run("attachments", "detach", id)
		if err != nil || !strings.Contains(out, "already ended") {
			t.Errorf("detach of ended %s: %q %v", id, out, err)
		}
	}
	var detaches int
	if err := pool.QueryRow(ctx, `select count(*) from audit_log where action = 'attachment.detach'`).Scan(&detaches); err != nil || detaches != 1 {
		t.Errorf("%d detaches audited (%v), want 1", detaches, err)
	}
	for _, id := range []string{"no-such", "00000000-0000-0000-0000-000000000000"} {
		if _, err := run("attachments", "detach", id); err == nil {
			t.Errorf("detach of unknown %s: no error", id)
		}
		if _, err := run("attachments", "show", id); err == nil {
			t.Errorf("show of unknown %s: no error", id)
		}
	}
}
