package meta_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// TestUnavailableCodes classifies the server's answers by SQLSTATE: the
// codes the registry cannot help (resources, read-only, shutdown,
// connection) are faults with a cause; the rest (constraints, syntax,
// serialization) pass unchanged.
func TestUnavailableCodes(t *testing.T) {
	for _, c := range []struct {
		code  string
		cause string // "": not a fault
	}{
		{"53100", "the database is out of disk space"},
		{"53200", "the database is out of memory"},
		{"53300", "the database has too many connections"},
		{"53400", "the database is out of resources"},
		{"25006", "the database is read-only"},
		{"57P01", "the database is unreachable"},
		{"57P02", "the database is unreachable"},
		{"57P03", "the database is unreachable"},
		{"08006", "the database is unreachable"},
		{"08001", "the database is unreachable"},
		{"23505", ""},
		{"40001", ""},
		{"42P01", ""},
		{"57014", ""}, // query_canceled: the caller's own deadline or cancel
	} {
		err := meta.Unavailable(fmt.Errorf("store: op: %w", &pgconn.PgError{Code: c.code, Message: "m"}))
		cause, ok := meta.Cause(err)
		if c.cause == "" {
			if ok || errors.Is(err, meta.ErrUnavailable) {
				t.Errorf("%s: classified as a fault (%q): %v", c.code, cause, err)
			}
			continue
		}
		if !ok || cause != c.cause || !errors.Is(err, meta.ErrUnavailable) {
			t.Errorf("%s: cause %q ok %v (%v), want %q", c.code, cause, ok, err, c.cause)
		}
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != c.code {
			t.Errorf("%s: the driver's error is no longer reachable: %v", c.code, err)
		}
	}
}

// TestUnavailableOthers: errors the driver did not produce pass unchanged,
// so that a network error of another client or a caller who left is not
// taken for a database fault; nil stays nil; classifying twice changes
// nothing.
func TestUnavailableOthers(t *testing.T) {
	if meta.Unavailable(nil) != nil {
		t.Error("Unavailable(nil) != nil")
	}
	for _, err := range []error{
		errors.New("plain"),
		io.EOF,
		io.ErrUnexpectedEOF,
		context.Canceled,
		context.DeadlineExceeded,
		syscall.ECONNREFUSED,
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}, // an S3 store's, say
		pgx.ErrNoRows,
		meta.ErrNotFound,
	} {
		if got := meta.Unavailable(err); got != err {
			t.Errorf("Unavailable(%v) = %v, want it unchanged", err, got)
		}
	}
	once := meta.Unavailable(&pgconn.PgError{Code: "53100"})
	if twice := meta.Unavailable(once); twice != once {
		t.Errorf("classified twice: %v", twice)
	}
	if _, ok := meta.Cause(errors.New("other")); ok {
		t.Error("Cause of another error: ok")
	}
}

// TestUnavailableDriver classifies what the real driver returns when it
// cannot reach a server: a refused connection, and a server that stops
// under an open connection.
func TestUnavailableDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	_, err = pgx.Connect(ctx, "postgres://postgres@"+addr+"/postgres?sslmode=disable&connect_timeout=5")
	if cause, ok := meta.Cause(meta.Unavailable(err)); !ok || cause != "the database is unreachable" {
		t.Errorf("refused connection %v: cause %q ok %v", err, cause, ok)
	}

	pg := testenv.Postgres(t)
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	pg.Stop(t)
	_, err = conn.Exec(ctx, `select 1`)
	if cause, ok := meta.Cause(meta.Unavailable(err)); !ok || cause != "the database is unreachable" {
		t.Errorf("server stopped under a connection (%v): cause %q ok %v", err, cause, ok)
	}
	if strings.Contains(meta.UnavailableMessage("the database is unreachable"), "127.0.0.1") {
		t.Error("the message names the host")
	}
	pg.Start(t)
	conn2, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("after Start: %v", err)
	}
	conn2.Close(ctx)
}
