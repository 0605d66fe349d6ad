package demo

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultPGBin is where Debian's postgresql-15 package puts the server
// binaries.
const DefaultPGBin = "/usr/lib/postgresql/15/bin"

const pgInstall = "install the Debian package postgresql-15 (apt-get install -y postgresql-15) or set FAAS_PG_BIN to the folder holding initdb and postgres"

// findPGBin finds initdb and postgres as internal/testenv does: FAAS_PG_BIN,
// Debian's folder, then PATH.
func findPGBin(dir string) (string, error) {
	has := func(d string) bool {
		for _, n := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(d, n)); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if dir != "" {
		if has(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("no initdb and postgres in %s; %s", dir, pgInstall)
	}
	if has(DefaultPGBin) {
		return DefaultPGBin, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries not found in %s or PATH; %s", DefaultPGBin, pgInstall)
}

// pgCredential is the postgres OS user when running as root (initdb and
// postgres refuse root), else nil.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, which PostgreSQL refuses, and there is no postgres user to run it as (%v); %s", err, pgInstall)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("postgres user has uid %q gid %q", u.Uid, u.Gid)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// postgres starts a throwaway cluster in dir, a new folder of its own (the
// postgres user must reach it), on a free loopback port, trusting loopback
// connections, and returns it with its URL.
func postgres(ctx context.Context, binDir, dir, logDir string) (*service, string, error) {
	bin, err := findPGBin(binDir)
	if err != nil {
		return nil, "", err
	}
	cred, err := pgCredential()
	if err != nil {
		return nil, "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, "", err
		}
	}
	data := filepath.Join(dir, "data")
	env := []string{"LC_ALL=C", "LANG=C", "TZ=UTC", "PATH=" + os.Getenv("PATH")}
	initdb := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	initdb.Dir, initdb.Env = dir, env
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, "", &runErr{cmd: "initdb", err: err, output: string(out)}
	}
	hba := "local all all trust\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\n"
	hbaPath := filepath.Join(data, "pg_hba.conf")
	if err := os.WriteFile(hbaPath, []byte(hba), 0o600); err != nil {
		return nil, "", err
	}
	if cred != nil {
		if err := os.Chown(hbaPath, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, "", err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", dir,
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	// SIGINT is PostgreSQL's fast shutdown: sessions end, the cluster stops
	// cleanly.
	s, err := start(cmd, "postgres", logDir, os.Interrupt)
	if err != nil {
		return nil, "", err
	}
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	err = poll(ctx, time.Minute, "PostgreSQL to accept connections", s, func() (bool, error) {
		conn, err := pgx.Connect(ctx, url+"&connect_timeout=1")
		if err != nil {
			return false, nil
		}
		return true, conn.Close(ctx)
	})
	if err != nil {
		s.Stop()
		return nil, "", err
	}
	return s, url, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
