package migrations_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/migrations"
)

func connect(t *testing.T, ctx context.Context, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestLatest(t *testing.T) {
	v, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}
	if v < 1 {
		t.Fatalf("Latest = %d, want >= 1", v)
	}
}

func TestApplyTwiceAndConcurrently(t *testing.T) {
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	latest, err := migrations.Latest()
	if err != nil {
		t.Fatal(err)
	}

	admin := connect(t, ctx, pg.URL)
	for _, db := range []string{"seq", "conc"} {
		if _, err := admin.Exec(ctx, "create database "+db); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("twice", func(t *testing.T) {
		conn := connect(t, ctx, pg.DatabaseURL("seq"))
		if v, err := migrations.Version(ctx, conn); err != nil || v != 0 {
			t.Fatalf("Version before = %d, %v; want 0", v, err)
		}
		for i := 0; i < 2; i++ {
			if err := migrations.Apply(ctx, conn); err != nil {
				t.Fatalf("Apply #%d: %v", i+1, err)
			}
			if v, err := migrations.Version(ctx, conn); err != nil || v != latest {
				t.Fatalf("Version after Apply #%d = %d, %v; want %d", i+1, v, err, latest)
			}
		}
		// The lock is released: another session can take it at once.
		other := connect(t, ctx, pg.DatabaseURL("seq"))
		var ok bool
		if err := other.QueryRow(ctx, "select pg_try_advisory_lock($1)", migrations.LockKey).Scan(&ok); err != nil || !ok {
			t.Fatalf("advisory lock still held after Apply: %v %v", ok, err)
		}
		checkSchema(t, ctx, conn)
	})

	t.Run("concurrently", func(t *testing.T) {
		const n = 4
		conns := make([]*pgx.Conn, n)
		for i := range conns {
			conns[i] = connect(t, ctx, pg.DatabaseURL("conc"))
		}
		var wg sync.WaitGroup
		errs := make([]error, n)
		start := make(chan struct{})
		for i := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = migrations.Apply(ctx, conns[i])
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Apply on connection %d: %v", i, err)
			}
		}
		if v, err := migrations.Version(ctx, conns[0]); err != nil || v != latest {
			t.Fatalf("Version = %d, %v; want %d", v, err, latest)
		}
		checkSchema(t, ctx, conns[0])
	})

	t.Run("pool", func(t *testing.T) {
		pool, err := pgxpool.New(ctx, pg.DatabaseURL("conc"))
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := migrations.ApplyPool(ctx, pool); err != nil {
					t.Errorf("ApplyPool: %v", err)
				}
			}()
		}
		wg.Wait()
	})
}

// checkSchema exercises the main constraints of the schema.
func checkSchema(t *testing.T, ctx context.Context, conn *pgx.Conn) {
	t.Helper()
	mustFail := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, "savepoint check_fail"); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, sql, args...); err == nil {
			t.Errorf("%s %v: succeeded, want a constraint violation", sql, args)
		}
		if _, err := conn.Exec(ctx, "rollback to savepoint check_fail"); err != nil {
			t.Fatal(err)
		}
	}
	must := func(sql string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s %v: %v", sql, args, err)
		}
	}
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)

	must("insert into accounts (name, role) values ('acme', 'isv')")
	mustFail("insert into accounts (name, role) values ('bob', 'root')")
	mustFail("insert into accounts (name, role) values ('acme', 'tenant')")
	must("insert into repositories (name, owner_id) select 'acme/dnn', id from accounts where name = 'acme'")
	d := "sha256:" + "ab" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd"
	mustFail("insert into blobs (digest, size) values ('md5:abc', 1)")
	must("insert into blobs (digest, size, media_type) values ($1, 3, 'application/octet-stream')", d)
	must("insert into manifests (repository_id, digest, media_type, size, content) select id, $1, 'application/vnd.oci.image.manifest.v1+json', 2, '{}' from repositories", d)
	must("insert into manifest_blobs (repository_id, manifest_digest, blob_digest) select id, $1, $1 from repositories", d)
	mustFail("delete from blobs where digest = $1", d)
	must("insert into tags (repository_id, name, manifest_digest) select id, 'v1', $1 from repositories", d)
	mustFail("insert into tags (repository_id, name, manifest_digest) select id, '-bad', $1 from repositories", d)
	mustFail("insert into validation_jobs (repository_id, manifest_digest, state) select id, $1, 'done' from repositories", d)
	must("insert into validation_jobs (repository_id, manifest_digest, reasons) select id, $1, '[{\"code\":\"X\"}]' from repositories", d)
	must("insert into tag_rules (repository_id, pattern) select id, 'v*' from repositories")
	mustFail("insert into tag_rules (repository_id, pattern) select id, 'v*' from repositories")
	mustFail("insert into tag_rules (repository_id, pattern) select id, '' from repositories")
	must("insert into audit_log (action, details) values ('test', '{\"a\":1}')")
	must("insert into listings (owner_id, name) select id, 'dnn' from accounts where name = 'acme'")
	price := func(at string, load int) string {
		return fmt.Sprintf(`insert into listing_prices (listing_id, effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros)
			select id, %s, %d, 0, 0 from listings`, at, load)
	}
	must(price("now()", 1))
	mustFail(price("now() - interval '1 second'", 1))
	mustFail(price("now() + interval '1 day'", -1))
	mustFail("update listing_prices set per_load_micros = 2")
	mustFail("delete from listing_prices")
	must(price("now() + interval '1 day'", 3))
	must("update listing_prices set per_load_micros = 4 where effective_at > now()")
	must("delete from listing_prices where effective_at > now()")
	// Every statement above ran inside tx's connection; undo it.
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPricesMigrated: listings priced before migration 011 keep their
// prices, effective from their creation, so that usage of the past is
// priced as it was.
func TestPricesMigrated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, m := migratedTo(t, ctx, 10)
	created := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	if _, err := conn.Exec(ctx, `with a as (insert into accounts (name, role) values ('acme', 'isv') returning id)
		insert into listings (owner_id, name, price_per_hour_micros, price_per_load_micros, created_at)
		select id, 'dnn', 3600000, 250, $1 from a`, created); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 11); err != nil {
		t.Fatal(err)
	}
	var at time.Time
	var load, hour, attached int64
	if err := conn.QueryRow(ctx, `select effective_at, per_load_micros, per_hour_micros, per_attached_hour_micros
		from listing_prices`).Scan(&at, &load, &hour, &attached); err != nil {
		t.Fatal(err)
	}
	if !at.Equal(created) || load != 250 || hour != 3600000 || attached != 0 {
		t.Fatalf("migrated price: from %v, %d per load, %d per hour, %d per attached hour", at, load, hour, attached)
	}
	if err := m.MigrateTo(ctx, 10); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := conn.QueryRow(ctx, `select price_per_hour_micros, price_per_load_micros from listings`).Scan(&hour, &load); err != nil ||
		hour != 3600000 || load != 250 {
		t.Fatalf("after down: %d per hour, %d per load, %v", hour, load, err)
	}
}

// migratedTo is a new database migrated up to version, a connection to it
// and its migrator, for a test of the migrations after it.
func migratedTo(t *testing.T, ctx context.Context, version int32) (*pgx.Conn, *migrate.Migrator) {
	t.Helper()
	conn := connect(t, ctx, testenv.Postgres(t).URL)
	m, err := migrate.NewMigrator(ctx, conn, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.FS()); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, version); err != nil {
		t.Fatal(err)
	}
	return conn, m
}
