package nodetrust_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// TestGrantIsSingleUse redeems one grant from many goroutines at once:
// exactly one wins, the rest get ErrInvalid.
func TestGrantIsSingleUse(t *testing.T) {
	ctx := context.Background()
	pool := testenv.RegistryDB(t)
	var admin, node string
	if err := pool.QueryRow(ctx, `insert into accounts (name, role) values ('op', 'admin') returning id::text`).Scan(&admin); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `insert into nodes (account_id, name, public_key) values ($1::uuid, 'n1', 'PEM') returning id::text`,
		admin).Scan(&node); err != nil {
		t.Fatal(err)
	}
	req := registryapi.GrantRequest{NodeID: node, Repository: "isv1/x", Digest: "sha256:" + strings.Repeat("0", 64)}
	caller := nodetrust.Caller{ID: admin, Role: "admin"}
	if _, err := nodetrust.Issue(ctx, pool, caller, req, 0); !errors.Is(err, nodetrust.ErrNotApproved) {
		t.Fatalf("grant for a pending node: %v, want ErrNotApproved", err)
	}
	if err := nodetrust.Approve(ctx, pool, node, "op"); err != nil {
		t.Fatal(err)
	}
	g, err := nodetrust.Issue(ctx, pool, caller, req, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nodetrust.Issue(ctx, pool, nodetrust.Caller{ID: admin, Role: "node"}, req, 0); !errors.Is(err, nodetrust.ErrPermission) {
		t.Errorf("a node account granting itself a load: %v, want ErrPermission", err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won, lost := 0, 0
	for range 16 {
		wg.Go(func() {
			_, err := nodetrust.Redeem(ctx, pool, g.Secret, req)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, nodetrust.ErrInvalid):
				lost++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won != 1 || lost != 15 {
		t.Errorf("16 concurrent redemptions: %d won, %d refused; want 1 and 15", won, lost)
	}
	// Garbage never reaches the database.
	for _, s := range []string{"", "fgr_", "fne_" + g.Secret[4:], g.Secret + "x", "fgr_!!!!"} {
		if _, err := nodetrust.Redeem(ctx, pool, s, req); !errors.Is(err, nodetrust.ErrInvalid) {
			t.Errorf("redeeming %q: %v, want ErrInvalid", s, err)
		}
	}
}
