package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
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

	var p *proc
	logShown := false // by fail, so that cleanup does not repeat it
	t.Cleanup(func() {
		if t.Failed() && !logShown {
			t.Logf("testenv: postgres log (%s):\n%s", logPath, logTail(logPath))
		}
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

	pg := &PG{Host: "127.0.0.1", User: "postgres", Database: "postgres", SocketDir: dir, DataDir: data}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(1)
		if err != nil {
			fail("%v", err)
		}
		pg.Port = ports[0]
		pg.URL = pg.DatabaseURL(pg.Database)
		p, err = start(logPath, cred, dir, env, filepath.Join(bin, "postgres"),
			"-D", data, "-p", strconv.Itoa(pg.Port), "-h", pg.Host, "-k", dir,
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
		if err != nil {
			fail("%v", err)
		}
		err = waitReady(p, pgReadyTimeout, func(ctx context.Context) error {
			conn, err := pgx.Connect(ctx, pg.URL+"&connect_timeout=1")
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		})
		if err == nil {
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
