package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPGBin is where Debian's postgresql-15 package puts the server binaries.
const DefaultPGBin = "/usr/lib/postgresql/15/bin"

// pgReadyTimeout bounds how long a new cluster may take to accept connections.
const pgReadyTimeout = 30 * time.Second

// PG is a running throwaway PostgreSQL cluster. Every role is trusted on
// loopback, so no password is needed.
type PG struct {
	URL       string // e.g. postgres://postgres@127.0.0.1:54321/postgres?sslmode=disable
	Host      string // 127.0.0.1
	Port      int
	User      string // the superuser, "postgres"
	Database  string // "postgres"
	SocketDir string // directory of the unix socket
	DataDir   string

	// What Stop and Start need.
	bin, logPath string
	cred         *syscall.Credential
	env          []string
	mu           sync.Mutex
	p            *proc
}

// DatabaseURL returns the URL of database name on this cluster.
func (pg *PG) DatabaseURL(name string) string {
	return fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", pg.User, pg.Host, pg.Port, name)
}

const pgInstall = "install them with `make tools` or the Debian package postgresql-15 (`apt-get install -y postgresql-15`), " +
	"or set FAAS_PG_BIN to the directory holding initdb, pg_ctl and postgres"

// pgBinDir finds the directory holding initdb, pg_ctl and postgres.
func pgBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("FAAS_PG_BIN"); dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found in FAAS_PG_BIN=%s; %s", dir, pgInstall)
	}
	if has(DefaultPGBin) {
		return DefaultPGBin, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if dir := filepath.Dir(p); has(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("PostgreSQL 15 server binaries (initdb, pg_ctl, postgres) not found in %s or PATH; %s", DefaultPGBin, pgInstall)
}

// pgCredential returns the credential to run the server with: the postgres
// OS user when running as root (initdb and postgres refuse root), else nil.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, and PostgreSQL refuses root, but there is no postgres OS user to run it as (%v); "+
			"the Debian package postgresql-15 creates it: %s", err, pgInstall)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres OS user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// Postgres starts a throwaway PostgreSQL cluster for the test and returns how
// to reach it. The cluster listens on a random port on 127.0.0.1 only, trusts
// every connection (it is reachable from loopback only), runs without
// durability (fsync, synchronous_commit and full_page_writes off) and keeps
// its unix socket in its own temporary directory. t.Cleanup stops it with
// `pg_ctl stop -m immediate` and removes the directory.
//
// Without the server binaries the test is skipped, or fails when CI=true.
func Postgres(t testing.TB) *PG {
	t.Helper()
	bin, err := pgBinDir()
	if err != nil {
		missing(t, "%v", err)
	}
	cred, err := pgCredential()
	if err != nil {
		missing(t, "%v", err)
	}

	began := time.Now()
	dir, err := os.MkdirTemp("", "faas-pg-")
	if err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			t.Fatalf("testenv: postgres: %v", err)
		}
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "postgres.log")
	env := cleanEnv([]string{"PG", "LC_", "LANG="}, "LC_ALL=C", "LANG=C", "TZ=UTC")

	pg := &PG{Host: "127.0.0.1", User: "postgres", Database: "postgres", SocketDir: dir, DataDir: data,
		bin: bin, logPath: logPath, cred: cred, env: env}
	logShown := false // by fail, so that cleanup does not repeat it
	t.Cleanup(func() {
		if t.Failed() && !logShown {
			t.Logf("testenv: postgres log (%s):\n%s", logPath, logTail(logPath))
		}
		pg.mu.Lock()
		p := pg.p
		pg.mu.Unlock()
		if p != nil {
			if !p.exited() {
				_ = run(15*time.Second, logPath, cred, dir, env, filepath.Join(bin, "pg_ctl"),
					"stop", "-D", data, "-m", "immediate", "-w", "-t", "10", "-s")
			}
			p.kill()
		}
		os.RemoveAll(dir)
	})
	fail := func(format string, args ...any) {
		t.Helper()
		logShown = true
		t.Fatalf("testenv: postgres: %s\nlog %s:\n%s", fmt.Sprintf(format, args...), logPath, logTail(logPath))
	}

	if err := run(time.Minute, logPath, cred, dir, env, filepath.Join(bin, "initdb"),
		"-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
		"--no-sync", "--no-instructions"); err != nil {
		fail("initdb: %v", err)
	}
	hba := "# written by internal/testenv: trust, on loopback only\n" +
		"local all all trust\n" +
		"host  all all 127.0.0.1/32 trust\n" +
		"host  all all ::1/128 trust\n"
	hbaPath := filepath.Join(data, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		fail("%v", err)
	}
	if cred != nil {
		if err := os.Chown(hbaPath, int(cred.Uid), int(cred.Gid)); err != nil {
			fail("%v", err)
		}
	}

	var p *proc
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			fail("%v", err)
		}
		pg.Port = ports[0]
		pg.URL = pg.DatabaseURL(pg.Database)
		p, err = pg.startServer()
		pg.mu.Lock()
		pg.p = p
		pg.mu.Unlock()
		if err != nil {
			fail("%v", err)
		}
		if err = pg.waitReady(p); err == nil {
			break
		}
		if p.exited() && portTaken(logTail(logPath)) && attempt < startAttempts {
			p.kill()
			continue // the port was taken between choosing and binding it
		}
		fail("server on port %d %v", pg.Port, err)
	}
	t.Logf("testenv: postgres ready at %s in %v", pg.URL, time.Since(began).Round(time.Millisecond))
	return pg
}

// startServer starts the server process on pg.Port.
func (pg *PG) startServer() (*proc, error) {
	return start(pg.logPath, pg.cred, pg.SocketDir, pg.env, filepath.Join(pg.bin, "postgres"),
		"-D", pg.DataDir, "-p", strconv.Itoa(pg.Port), "-h", pg.Host, "-k", pg.SocketDir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
}

// waitReady waits until the server process p accepts connections.
func (pg *PG) waitReady(p *proc) error {
	return waitReady(p, pgReadyTimeout, func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, pg.URL+"&connect_timeout=1")
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	})
}

// Stop stops the server (`pg_ctl stop -m fast`: open connections are
// ended), so that a test can watch its clients meet a database that is
// gone. Start starts it again on the same port and data.
func (pg *PG) Stop(t testing.TB) {
	t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.p == nil || pg.p.exited() {
		t.Fatalf("testenv: postgres: Stop: the server is not running")
	}
	if err := run(time.Minute, pg.logPath, pg.cred, pg.SocketDir, pg.env, filepath.Join(pg.bin, "pg_ctl"),
		"stop", "-D", pg.DataDir, "-m", "fast", "-w", "-t", "50", "-s"); err != nil {
		t.Fatalf("testenv: postgres: stop: %v\nlog %s:\n%s", err, pg.logPath, logTail(pg.logPath))
	}
	select {
	case <-pg.p.done:
	case <-time.After(time.Minute):
		t.Fatalf("testenv: postgres: the server did not exit after pg_ctl stop")
	}
	t.Logf("testenv: postgres at %s stopped", pg.URL)
}

// Start starts the server that Stop stopped, on the same port, and waits
// until it accepts connections.
func (pg *PG) Start(t testing.TB) {
	t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if pg.p != nil && !pg.p.exited() {
		t.Fatalf("testenv: postgres: Start: the server is running")
	}
	p, err := pg.startServer()
	if err != nil {
		t.Fatalf("testenv: postgres: start: %v", err)
	}
	pg.p = p
	if err := pg.waitReady(p); err != nil {
		t.Fatalf("testenv: postgres: server on port %d %v\nlog %s:\n%s", pg.Port, err, pg.logPath, logTail(pg.logPath))
	}
	t.Logf("testenv: postgres at %s started again", pg.URL)
}

// Restart stops the server and starts it again on the same data and port
// (Stop, then Start): for chaos tests of what the platform does when its
// database goes away and comes back.
func (pg *PG) Restart(t testing.TB) {
	t.Helper()
	pg.Stop(t)
	pg.Start(t)
}

// Own gives path to the OS user the server runs as, so that the server can
// use a directory the test made (a tablespace on a Tmpfs, say): it chowns
// path and lets others search its parent directories (t.TempDir makes
// them 0700 for the test's user only) up to os.TempDir.
func (pg *PG) Own(t testing.TB, path string) {
	t.Helper()
	if pg.cred == nil {
		return // the server runs as the test's own user
	}
	if err := os.Chown(path, int(pg.cred.Uid), int(pg.cred.Gid)); err != nil {
		t.Fatalf("testenv: postgres: %v", err)
	}
	// Only up to the temporary directory: nothing outside a test's own.
	tmp := filepath.Clean(os.TempDir())
	for dir := filepath.Dir(path); strings.HasPrefix(dir, tmp+string(filepath.Separator)); dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatalf("testenv: postgres: %v", err)
		}
		if fi.Mode().Perm()&0o001 != 0 {
			continue
		}
		if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil {
			t.Fatalf("testenv: postgres: %v", err)
		}
	}
}
