package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/tern/v2/migrate"
)

//go:embed *.sql
var files embed.FS

// VersionTable is the schema-qualified table in which tern records the
// number of the last applied migration.
const VersionTable = "public.schema_version"

// LockKey is the key of the PostgreSQL session advisory lock held while
// migrations are checked and applied (pg_advisory_lock(LockKey)).
const LockKey int64 = 0x66616173_72656731 // "faasreg1"

// FS returns the embedded migration files.
func FS() fs.FS { return files }

// Latest returns the version (the number of the last migration) that Apply
// brings a database to.
func Latest() (int32, error) {
	names, err := migrate.FindMigrations(files)
	if err != nil {
		return 0, fmt.Errorf("migrations: %w", err)
	}
	return int32(len(names)), nil
}

// Apply brings the database conn is connected to up to the latest schema.
// It holds the advisory lock LockKey on conn for the whole run and releases
// it before returning, so that concurrent callers (other replicas) wait and
// then find nothing to do. conn must not be used concurrently meanwhile.
func Apply(ctx context.Context, conn *pgx.Conn) (err error) {
	if _, err := conn.Exec(ctx, "select pg_advisory_lock($1)", LockKey); err != nil {
		return fmt.Errorf("migrations: take advisory lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx is done; if that fails the lock goes with the session.
		uctx := context.WithoutCancel(ctx)
		if _, uerr := conn.Exec(uctx, "select pg_advisory_unlock($1)", LockKey); uerr != nil {
			err = errors.Join(err, fmt.Errorf("migrations: release advisory lock: %w", uerr))
		}
	}()

	m, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := m.LoadMigrations(files); err != nil {
		return fmt.Errorf("migrations: load: %w", err)
	}
	if err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrations: migrate: %w", err)
	}
	return nil
}

// ApplyPool is Apply on a connection acquired from pool. If releasing the
// advisory lock fails, the connection is closed rather than returned to the
// pool, which also drops the lock.
func ApplyPool(ctx context.Context, pool *pgxpool.Pool) error {
	c, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrations: acquire connection: %w", err)
	}
	err = Apply(ctx, c.Conn())
	if err != nil {
		conn := c.Hijack()
		_ = conn.Close(context.WithoutCancel(ctx))
		return err
	}
	c.Release()
	return nil
}

// Version returns the schema version recorded in the database, 0 when no
// migration has been applied.
func Version(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var exists bool
	if err := conn.QueryRow(ctx, "select to_regclass($1) is not null", VersionTable).Scan(&exists); err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int32
	if err := conn.QueryRow(ctx, "select version from "+VersionTable).Scan(&v); err != nil {
		return 0, fmt.Errorf("migrations: version: %w", err)
	}
	return v, nil
}
