package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/migrations"
)

// RegistryDB starts a throwaway PostgreSQL cluster (see Postgres), applies
// the registry's migrations and returns a pool on it, closed when the test
// ends.
func RegistryDB(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pg := Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatalf("testenv: connecting to %s: %v", pg.URL, err)
	}
	t.Cleanup(pool.Close)
	if err := migrations.ApplyPool(ctx, pool); err != nil {
		t.Fatalf("testenv: migrations: %v", err)
	}
	return pool
}
