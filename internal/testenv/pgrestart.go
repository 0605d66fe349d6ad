package testenv

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Restart stops the cluster (pg_ctl stop -m fast: clients are cut, as in an
// operator's restart) and starts it again on the same data directory and
// port, waiting until it accepts connections: for chaos tests of what the
// platform does when its database goes away and comes back. The new server
// is stopped when the test ends, before the directory is removed.
func (pg *PG) Restart(t testing.TB) {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		t.Fatalf("testenv: postgres restart: %v", err)
	}
	cred, err := pgCredential()
	if err != nil {
		t.Fatalf("testenv: postgres restart: %v", err)
	}
	dir := pg.SocketDir // Postgres keeps the log and the socket here
	logPath := filepath.Join(dir, "postgres.log")
	env := cleanEnv([]string{"PG", "LC_", "LANG="}, "LC_ALL=C", "LANG=C", "TZ=UTC")
	if err := run(pgReadyTimeout, logPath, cred, dir, env, filepath.Join(bin, "pg_ctl"),
		"stop", "-D", pg.DataDir, "-m", "fast", "-w", "-t", "20", "-s"); err != nil {
		t.Fatalf("testenv: postgres restart: stop: %v\n%s", err, logTail(logPath))
	}
	// The same server arguments as Postgres's: the port cannot be taken
	// in between by another test's cluster in practice, and a failure to
	// bind it is reported, not retried on another port, since clients
	// know this one.
	p, err := start(logPath, cred, dir, env, filepath.Join(bin, "postgres"),
		"-D", pg.DataDir, "-p", strconv.Itoa(pg.Port), "-h", pg.Host, "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	if err != nil {
		t.Fatalf("testenv: postgres restart: %v", err)
	}
	t.Cleanup(func() {
		if !p.exited() {
			_ = run(pgReadyTimeout, logPath, cred, dir, env, filepath.Join(bin, "pg_ctl"),
				"stop", "-D", pg.DataDir, "-m", "immediate", "-w", "-t", "10", "-s")
		}
		p.kill()
	})
	err = waitReady(p, pgReadyTimeout, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, pg.URL+"&connect_timeout=1")
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
	if err != nil {
		t.Fatalf("testenv: postgres restart: server on port %d %v\n%s", pg.Port, err, logTail(logPath))
	}
}
