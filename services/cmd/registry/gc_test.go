package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/gc"
	"github.com/fpga-faas/faas/services/registry/meta"
)

func TestGC(t *testing.T) {
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	ctx := context.Background()
	run := func(args ...string) (stdout, stderr string, err error) {
		var out, errOut bytes.Buffer
		root := newRoot(strings.NewReader(""), &out, &errOut)
		root.SetArgs(append(append([]string{"gc"}, args...), "--database-url", pg.URL, "--data-dir", dir))
		err = root.ExecuteContext(ctx)
		return out.String(), errOut.String(), err
	}
	// An empty registry: nothing to do (and the schema gets applied).
	if out, _, err := run(); err != nil || !strings.Contains(out, "removed 0 of 0 blobs") {
		t.Fatalf("gc of an empty registry: %q, %v", out, err)
	}
	// Bytes no row names: garbage once older than the grace period.
	st, err := dirstore.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	up, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("orphaned bytes")
	if _, err := up.Write(ctx, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	d := blob.FromBytes(p)
	if _, err := up.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}

	if out, _, err := run("--dry-run"); err != nil || !strings.Contains(out, "would remove 0 of 1 blobs") {
		t.Fatalf("gc within the grace period: %q, %v", out, err)
	}
	out, progress, err := run("--dry-run", "--json", "--grace-period", "1ns")
	if err != nil {
		t.Fatal(err)
	}
	var rep gc.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if !rep.DryRun || len(rep.Blobs) != 1 || rep.Blobs[0].Digest != string(d) || rep.Blobs[0].Size != int64(len(p)) {
		t.Fatalf("dry run report %+v", rep)
	}
	if !strings.Contains(progress, "gc: marked") || !strings.Contains(progress, "gc: done") {
		t.Errorf("no progress on stderr: %q", progress)
	}
	if _, err := st.Stat(ctx, d); err != nil {
		t.Fatalf("dry run removed the blob: %v", err)
	}

	out, _, err = run("--grace-period", "1ns")
	if err != nil || !strings.Contains(out, "removed blob "+string(d)) || !strings.Contains(out, "removed 1 of 1 blobs") {
		t.Fatalf("gc: %q, %v", out, err)
	}
	if _, err := st.Stat(ctx, d); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("blob after gc: %v", err)
	}

	// A second collection while one runs: ErrGCBusy (exit code 3).
	pool, err := pgxpool.New(ctx, pg.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	g, err := meta.New(pool).BeginGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, _, err := run(); !errors.Is(err, meta.ErrGCBusy) {
		t.Fatalf("concurrent gc: %v, want ErrGCBusy", err)
	}
	if _, _, err := run("--grace-period", "-1s"); err == nil || !strings.Contains(err.Error(), "--grace-period") {
		t.Fatalf("negative grace period: %v", err)
	}
}
