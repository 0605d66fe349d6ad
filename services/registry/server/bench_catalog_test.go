package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/internal/loadtest"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// The catalog's benchmarks: GET /api/v1/catalog over catalogListings
// published listings of catalogVendors ISVs, with a month and more of
// loads, under an open-loop load of catalogRate req/s; the target
// is p99 ≤ 50 ms. BenchmarkAPICatalogHealthz is their floor under the
// same load.
const (
	catalogListings = 10_000
	catalogVendors  = 100
	catalogLoads    = 50_000
	catalogRate     = 100
)

// newCatalogEnv is a registry whose catalog holds catalogListings
// listings, written in SQL: through the API they would take minutes.
// Every catalogVendors-th listing is acme's.
func newCatalogEnv(b *testing.B) (*benchServer, string) {
	b.Helper()
	pg := testenv.Postgres(b)
	reg := startBench(b, server.Config{DatabaseURL: pg.URL})
	reg.apiToken(b, "acme", auth.RoleISV)
	for i := 1; i < catalogVendors; i++ {
		reg.apiToken(b, fmt.Sprintf("isv-%02d", i), auth.RoleISV)
	}
	reg.apiToken(b, "node", auth.RoleNode)
	token := reg.apiToken(b, "tenant", auth.RoleTenant)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		`insert into repositories (name, owner_id)
		 select a.name || '/ip-' || lpad(i::text, 5, '0'), a.id from generate_series(0, $1 - 1) i
		 join (select id, name, row_number() over (order by name) - 1 as n from accounts where role = 'isv') a
		   on a.n = i % $2`,
		`insert into listings (owner_id, repository_id, name, summary, category, board_model, visibility, published, created_at)
		 select owner_id, id, split_part(name, '/', 2),
		   (array['int8 convolution', 'AES-256-GCM at line rate', 'video scaler', 'regex matcher', 'genome aligner',
		          'LZ4 compressor'])[1 + i % 6] || ' engine ' || i,
		   (array['ml', 'ml', 'video', 'crypto', 'genomics', 'compression', 'other'])[1 + i % 7],
		   (array['faas-vu9p-2', 'faas-ku115', 'u250', 'u280', 'vck5000'])[1 + i % 5], 'public', true,
		   now() - i * interval '1 minute'
		 from (select *, row_number() over (order by id) - 1 as i from repositories) r where $1 > 0 and $2 > 0`,
		`insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros)
		 select id, now(), 0, (row_number() over (order by id) % 50) * 500000, 0 from listings where $1 > 0 and $2 > 0`,
		`insert into nodes (account_id, name, public_key) select id, 'node', '' from accounts where name = 'node' and $1 > 0 and $2 > 0`,
	} {
		if _, err := conn.Exec(ctx, q, catalogListings, catalogVendors); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := conn.Exec(ctx, `insert into usage_records (node_id, tenant_id, listing_id, event, recorded_at)
		select (select id from nodes), (select id from accounts where name = 'tenant'), l.id, 'load',
		  now() - (g % 40) * interval '1 day'
		from generate_series(1, $1) g join (select id, row_number() over (order by id) as n from listings) l
		  on l.n = 1 + (g * 7919) % $2`, catalogLoads, catalogListings); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `analyze`); err != nil {
		b.Fatal(err)
	}
	return reg, token
}

func benchCatalog(b *testing.B, path string, check func(registryapi.Catalog) error) {
	reg, token := newCatalogEnv(b)
	benchAt(b, reg.url+path, token, func(resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		if check == nil {
			return nil
		}
		var c registryapi.Catalog
		if err := json.Unmarshal(body, &c); err != nil {
			return err
		}
		return check(c)
	})
}

// BenchmarkAPICatalogSearch is a search by vendor, the marketplace's
// search box: GET /api/v1/catalog?q=acme&limit=24 finds acme's listings
// among all, ranked, with the facets' counts.
func BenchmarkAPICatalogSearch(b *testing.B) {
	benchCatalog(b, registryapi.Prefix+"/catalog?q=acme&limit=24", func(c registryapi.Catalog) error {
		if c.Total != catalogListings/catalogVendors || len(c.Items) != 24 || c.Items[0].Owner != "acme" {
			return fmt.Errorf("q=acme: total %d, %d items", c.Total, len(c.Items))
		}
		return nil
	})
}

// BenchmarkAPICatalogBrowse is the marketplace's first page: no words,
// the popular order over every listing, and the facets of all.
func BenchmarkAPICatalogBrowse(b *testing.B) {
	benchCatalog(b, registryapi.Prefix+"/catalog?limit=24", func(c registryapi.Catalog) error {
		if c.Total != catalogListings || len(c.Items) != 24 || c.Items[0].Loads30d == 0 {
			return fmt.Errorf("browse: total %d, %d items", c.Total, len(c.Items))
		}
		return nil
	})
}

// BenchmarkAPICatalogHealthz is the catalog benchmarks' floor: /healthz of
// the same registry under the same load.
func BenchmarkAPICatalogHealthz(b *testing.B) {
	benchCatalog(b, "/healthz", nil)
}

func benchAt(b *testing.B, url, token string, check func(*http.Response, []byte) error) {
	c := newClient(loadWorkers)
	defer c.CloseIdleConnections()
	loadtest.Bench(b, c, func() (*http.Request, error) {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		return req, nil
	}, check, loadtest.Load{Rate: catalogRate, Duration: 2 * time.Second, Workers: loadWorkers})
}
