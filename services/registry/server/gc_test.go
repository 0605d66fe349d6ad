package server_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/server"
)

// TestScheduledGC: Serve collects garbage on its own, and counts it.
func TestScheduledGC(t *testing.T) {
	dir := t.TempDir()
	// Bytes no row names, older than the grace period by the time the
	// first collection runs.
	st, err := dirstore.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	up, err := st.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := []byte("garbage")
	if _, err := up.Write(ctx, bytes.NewReader(p)); err != nil {
		t.Fatal(err)
	}
	d := blob.FromBytes(p)
	if _, err := up.Commit(ctx, d); err != nil {
		t.Fatal(err)
	}
	r := start(t, server.Config{DataDir: dir, GCInterval: 20 * time.Millisecond, GCGracePeriod: time.Nanosecond})
	for {
		_, err := st.Stat(ctx, d)
		if errors.Is(err, blob.ErrNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	ran := regexp.MustCompile(`(?m)^faas_registry_gc_runs_total\{result="ok"\} [1-9]`)
	for {
		_, body := get(t, r.metrics+"/metrics", nil)
		if strings.Contains(body, "\nfaas_registry_gc_removed_blobs_total 1\n") && ran.MatchString(body) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
}
