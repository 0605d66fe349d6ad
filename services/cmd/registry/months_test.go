package main

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
)

// TestMonthsClose: the operator closes months in order, at the fee it
// names, audited under its name; a month not over, or closed already, is
// refused.
func TestMonthsClose(t *testing.T) {
	pg := testenv.Postgres(t)
	ctx := context.Background()
	common := []string{"--database-url", pg.URL, "--data-dir", t.TempDir()}
	run := func(args ...string) (string, error) {
		var out strings.Builder
		root := newRoot(strings.NewReader(""), &out, io.Discard)
		root.SetArgs(append(args, common...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	y, m, _ := time.Now().UTC().Date()
	month := func(back int) string {
		return time.Date(y, m-time.Month(back), 1, 0, 0, 0, 0, time.UTC).Format("2006-01")
	}
	out, err := run("months", "close", month(2), "--platform-fee-bps", "750", "--json")
	var closed registryapi.MonthClosed
	if err != nil || json.Unmarshal([]byte(out), &closed) != nil || closed.Month != month(2) || closed.FeeBasisPoints != 750 {
		t.Fatalf("close %s: %q, %v", month(2), out, err)
	}
	if out, err := run("months", "close", month(1)); err != nil || !strings.Contains(out, "month "+month(1)+" closed") ||
		!strings.Contains(out, "fee 2000 basis points") {
		t.Fatalf("close %s: %q, %v", month(1), out, err)
	}
	for _, bad := range []string{month(1), month(0), "October"} {
		if out, err := run("months", "close", bad); err == nil {
			t.Errorf("close %s: %q, want a refusal", bad, out)
		}
	}
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var n int
	if err := pool.QueryRow(ctx, `select count(*) from audit_log where action = 'statement.close' and actor_name like 'cli%'
		and actor_id is null`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d closes audited as the operator, %v", n, err)
	}
}
