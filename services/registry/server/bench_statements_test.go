package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// The statements' benchmark: a month of statementRecords usage records
// (loads and busy spans) of statementTenants tenants on statementListings
// listings, each listing with a price change in the middle of the month,
// written in SQL.
const (
	statementTenants  = 10_000
	statementListings = 100
	statementRecords  = 1_000_000
)

// BenchmarkStatements prices a month for everyone, as the operator's view
// of the invoices does (GET /api/v1/invoices?month=, admin: every tenant's
// invoice, a preview of the month's close), against the plain SQL sum of
// the same rows (per tenant, listing and event: count and busy time, no
// prices) through the same database in the same run: the floor a statement
// cannot beat, since it reads every row too.
func BenchmarkStatements(b *testing.B) {
	pg := testenv.Postgres(b)
	reg := startBench(b, server.Config{DatabaseURL: pg.URL})
	admin := reg.apiToken(b, "operator", auth.RoleAdmin)
	reg.apiToken(b, "node", auth.RoleNode)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	y, m, _ := time.Now().UTC().Date()
	month := time.Date(y, m-1, 1, 0, 0, 0, 0, time.UTC)
	fillStatements(b, conn, month)

	path := "/invoices?month=" + month.Format("2006-01")
	b.Run("invoices", func(b *testing.B) {
		var tenants int
		for b.Loop() {
			var out registryapi.Items[registryapi.Invoice]
			reg.apiCall(b, admin, http.MethodGet, path, nil, http.StatusOK, &out)
			tenants = len(out.Items)
		}
		if tenants != statementTenants {
			b.Fatalf("%d invoices, want one per tenant (%d)", tenants, statementTenants)
		}
		b.ReportMetric(statementRecords/(float64(b.Elapsed().Seconds())/float64(b.N))/1e6, "Mrecords/s")
	})
	b.Run("sql-sum", func(b *testing.B) {
		var groups int
		for b.Loop() {
			rows, err := conn.Query(ctx, `select tenant_id, listing_id, event, count(*), sum(busy_ns) from usage_records
				where coalesce(started_at, recorded_at) >= $1 and coalesce(started_at, recorded_at) < $1::timestamptz + interval '1 month'
				group by 1, 2, 3`, month)
			if err != nil {
				b.Fatal(err)
			}
			groups = 0
			for rows.Next() {
				groups++
			}
			if err := rows.Err(); err != nil {
				b.Fatal(err)
			}
		}
		if groups < statementTenants {
			b.Fatalf("%d groups, want at least one per tenant", groups)
		}
		b.ReportMetric(statementRecords/(float64(b.Elapsed().Seconds())/float64(b.N))/1e6, "Mrecords/s")
	})
}

// fillStatements writes the benchmark's accounts, listings, prices and a
// month of usage: every tenant has statementRecords/statementTenants
// records, alternately loads and busy spans of up to an hour.
func fillStatements(b *testing.B, conn *pgx.Conn, month time.Time) {
	b.Helper()
	ctx := context.Background()
	// Prices in the past are history the database refuses to write now.
	if _, err := conn.Exec(ctx, `set session_replication_role = replica`); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`insert into accounts (name, role) select 'isv-' || i, 'isv' from generate_series(1, 10) i`, nil},
		{`insert into accounts (name, role) select 'tenant-' || i, 'tenant' from generate_series(1, $1) i`, []any{statementTenants}},
		{`insert into repositories (name, owner_id)
		 select a.name || '/ip-' || i, a.id from generate_series(0, $1 - 1) i
		 join (select id, name, row_number() over (order by name) - 1 as n from accounts where role = 'isv') a on a.n = i % 10`,
			[]any{statementListings}},
		{`insert into listings (owner_id, repository_id, name, summary, category, board_model, visibility, published)
		 select owner_id, id, split_part(name, '/', 2), 'bench', 'ml', 'faas-vu9p-2', 'public', true from repositories`, nil},
		{`insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros)
		 select id, $1::timestamptz - interval '1 year', 250000, 1500000, 900000 from listings`, []any{month}},
		{`insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros)
		 select id, $1::timestamptz + interval '15 days', 300000, 1750000, 1000000 from listings`, []any{month}},
		{`insert into nodes (account_id, name, public_key) select id, 'node', '' from accounts where name = 'node'`, nil},
	} {
		if _, err := conn.Exec(ctx, q.sql, q.args...); err != nil {
			b.Fatalf("%.60s: %v", q.sql, err)
		}
	}
	start := time.Now()
	if _, err := conn.Exec(ctx, `insert into usage_records (node_id, tenant_id, listing_id, event, busy_ns, started_at, ended_at, recorded_at, report_id)
		select (select id from nodes), t.id, l.id, case when g % 2 = 0 then 'load' else 'busy' end,
		  case when g % 2 = 0 then 0 else (g % 3600 + 1)::bigint * 1000000000 end,
		  $2::timestamptz + (g % 2592000) * interval '1 second',
		  case when g % 2 = 0 then null else $2::timestamptz + (g % 2592000 + g % 3600 + 1) * interval '1 second' end,
		  $2::timestamptz + (g % 2592000) * interval '1 second', 'r' || g
		from generate_series(0, $1 - 1) g
		join (select id, row_number() over (order by id) - 1 as n from accounts where role = 'tenant') t on t.n = g % $3
		join (select id, row_number() over (order by id) - 1 as n from listings) l on l.n = (g / $3) % $4`,
		statementRecords, month, statementTenants, statementListings); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `set session_replication_role = origin`); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `analyze`); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d usage records written in %v", statementRecords, time.Since(start).Round(time.Millisecond))
}
