package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// TestNodes drives the operator's node commands against a real database:
// enroll prints a token that approves the node registering with it, approve
// and revoke change a node's state, repin forgets its TLS certificate, list shows it, and each is audited.
func TestNodes(t *testing.T) {
	pg := testenv.Postgres(t)
	ctx := context.Background()
	common := []string{"--database-url", pg.URL, "--data-dir", t.TempDir()}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		root := newRoot(strings.NewReader("pw-node1\n"), &out, io.Discard)
		root.SetArgs(append(args, common...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	if _, err := run("users", "add", "node1", "--role", "node"); err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var id string
	if err := pool.QueryRow(ctx, `insert into nodes (account_id, name, public_key) select id, 'fpga-07', 'PEM' from accounts
		where name = 'node1' returning id::text`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	state := func() string {
		t.Helper()
		out, err := run("nodes", "list", "--json")
		if err != nil {
			t.Fatal(err)
		}
		var nodes []nodetrust.Node
		if err := json.Unmarshal([]byte(out), &nodes); err != nil || len(nodes) != 1 || nodes[0].ID != id {
			t.Fatalf("nodes list --json: %q %v", out, err)
		}
		return nodes[0].State()
	}
	if s := state(); s != "pending" {
		t.Fatalf("a registered node is %s, want pending", s)
	}
	if out, err := run("nodes", "approve", "fpga-07"); err != nil || !strings.Contains(out, id+" approved") {
		t.Fatalf("nodes approve by host name: %q %v", out, err)
	}
	if s := state(); s != "approved" {
		t.Fatalf("after approve: %s", s)
	}
	if out, err := run("nodes", "list"); err != nil || !strings.Contains(out, "fpga-07") || !strings.Contains(out, "approved") {
		t.Fatalf("nodes list: %q %v", out, err)
	}
	if _, err := pool.Exec(ctx, `update nodes set tls_certificate = 'pinned' where id = $1::uuid`, id); err != nil {
		t.Fatal(err)
	}
	if out, err := run("nodes", "repin", "fpga-07"); err != nil || !strings.Contains(out, id+" repinned") {
		t.Fatalf("nodes repin: %q %v", out, err)
	}
	var pinned string
	if err := pool.QueryRow(ctx, `select tls_certificate from nodes where id = $1::uuid`, id).Scan(&pinned); err != nil || pinned != "" {
		t.Fatalf("after repin the pin is %q (%v)", pinned, err)
	}
	if _, err := run("nodes", "repin", "no-such-node"); err == nil {
		t.Error("an unknown node was repinned")
	}
	if _, err := run("nodes", "revoke", id); err != nil {
		t.Fatal(err)
	}
	if s := state(); s != "revoked" {
		t.Fatalf("after revoke: %s", s)
	}
	if _, err := run("nodes", "approve", id); err == nil {
		t.Error("a revoked node was approved again")
	}
	if _, err := run("nodes", "approve", "no-such-node"); err == nil {
		t.Error("approving an unknown node succeeded")
	}

	out, err := run("nodes", "enroll", "--ttl", "5m", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var e registryapi.Enrollment
	if err := json.Unmarshal([]byte(out), &e); err != nil || !strings.HasPrefix(e.Token, nodetrust.EnrollmentPrefix) {
		t.Fatalf("nodes enroll --json: %q %v", out, err)
	}
	var id2 string
	if err := pool.QueryRow(ctx, `insert into nodes (account_id, name, public_key) select id, 'fpga-08', 'PEM' from accounts
		where name = 'node1' returning id::text`).Scan(&id2); err != nil {
		t.Fatal(err)
	}
	if err := nodetrust.Enroll(ctx, pool, e.Token, id2); err != nil {
		t.Fatalf("enrolling with the printed token: %v", err)
	}
	if err := nodetrust.Enroll(ctx, pool, e.Token, id2); err == nil {
		t.Error("an enrollment token worked twice")
	}
	if _, err := run("nodes", "enroll", "--ttl", "9000h"); err == nil {
		t.Error("an enrollment token of 9000h was made")
	}
	var audited int
	if err := pool.QueryRow(ctx, `select count(*) from audit_log where actor_name like 'cli%' and action in
		('node.approve', 'node.revoke', 'node.repin', 'node.enrollment.create')`).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if audited != 4 {
		t.Errorf("%d operator actions audited, want 4", audited)
	}
}
