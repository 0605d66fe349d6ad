package meta_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/meta"
)

func newStore(t *testing.T) *meta.Store {
	t.Helper()
	return meta.New(testenv.RegistryDB(t))
}

func digest(c byte) string {
	b := make([]byte, 64)
	for i := range b {
		b[i] = c
	}
	return "sha256:" + string(b)
}

func TestStore(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	blobA, blobB, man, idx, ref := digest('a'), digest('b'), digest('1'), digest('2'), digest('3')

	t.Run("blobs", func(t *testing.T) {
		if _, err := s.BlobSize(ctx, "r/one", blobA); !errors.Is(err, meta.ErrBlobUnknown) || !errors.Is(err, meta.ErrNotFound) {
			t.Fatalf("BlobSize before = %v", err)
		}
		if err := s.PutBlob(ctx, "r/one", blobA, 10); err != nil {
			t.Fatal(err)
		}
		if n, err := s.BlobSize(ctx, "r/one", blobA); err != nil || n != 10 {
			t.Fatalf("BlobSize = %d, %v", n, err)
		}
		if _, err := s.MountBlob(ctx, "r/two", "r/none", blobA); !errors.Is(err, meta.ErrBlobUnknown) {
			t.Fatalf("mount from a repo without it = %v", err)
		}
		if n, err := s.MountBlob(ctx, "r/two", "r/one", blobA); err != nil || n != 10 {
			t.Fatalf("mount = %d, %v", n, err)
		}
		if err := s.UnlinkBlob(ctx, "r/one", blobA); err != nil {
			t.Fatal(err)
		}
		if err := s.UnlinkBlob(ctx, "r/one", blobA); !errors.Is(err, meta.ErrBlobUnknown) {
			t.Fatalf("second unlink = %v", err)
		}
	})

	t.Run("manifests", func(t *testing.T) {
		m := meta.Manifest{Digest: man, MediaType: "application/vnd.oci.image.manifest.v1+json", Content: []byte("m"),
			Blobs: []string{blobA, blobB}}
		err := s.PutManifest(ctx, "r/two", m, "v1")
		var missing *meta.MissingError
		if !errors.As(err, &missing) || missing.Digest != blobB || !errors.Is(err, meta.ErrBlobUnknown) {
			t.Fatalf("PutManifest with a missing blob = %v", err)
		}
		if _, err := s.GetManifest(ctx, "r/two", "v1"); !errors.Is(err, meta.ErrManifestUnknown) {
			t.Fatalf("refused manifest is visible: %v", err)
		}
		if err := s.PutBlob(ctx, "r/two", blobB, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.PutManifest(ctx, "r/two", m, "v1"); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetManifest(ctx, "r/two", "v1")
		if err != nil || got.Digest != man || string(got.Content) != "m" {
			t.Fatalf("GetManifest = %+v, %v", got, err)
		}
		if _, err := s.GetManifest(ctx, "r/nothing", "v1"); !errors.Is(err, meta.ErrRepositoryUnknown) {
			t.Fatalf("unknown repo = %v", err)
		}
		// An index over it, and a referrer.
		if err := s.PutManifest(ctx, "r/two", meta.Manifest{Digest: idx, MediaType: "application/vnd.oci.image.index.v1+json",
			Content: []byte("i"), Children: []string{man}}, "idx"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteManifest(ctx, "r/two", man); !errors.Is(err, meta.ErrInUse) {
			t.Fatalf("delete of a listed manifest = %v", err)
		}
		if err := s.PutManifest(ctx, "r/two", meta.Manifest{Digest: ref, MediaType: "application/vnd.oci.image.manifest.v1+json",
			ArtifactType: "application/x-sig", Subject: man, Content: []byte("r"), Blobs: []string{blobA},
			Annotations: map[string]string{"k": "v"}}, ""); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			filter string
			want   int
		}{{"", 1}, {"application/x-sig", 1}, {"application/x-other", 0}} {
			rs, err := s.Referrers(ctx, "r/two", man, tc.filter)
			if err != nil || len(rs) != tc.want {
				t.Fatalf("Referrers(%q) = %+v, %v", tc.filter, rs, err)
			}
			if tc.want == 1 && (rs[0].Digest != ref || rs[0].Annotations["k"] != "v" || rs[0].Size != 1) {
				t.Fatalf("referrer %+v", rs[0])
			}
		}
		if err := s.DeleteManifest(ctx, "r/two", idx); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetManifest(ctx, "r/two", "idx"); !errors.Is(err, meta.ErrManifestUnknown) {
			t.Fatalf("tag of a deleted manifest = %v", err)
		}
	})

	t.Run("tags and catalog", func(t *testing.T) {
		m := meta.Manifest{Digest: digest('4'), MediaType: "application/vnd.oci.image.index.v1+json", Content: []byte("{}")}
		for _, tag := range []string{"b", "B", "a", "c"} {
			if err := s.PutManifest(ctx, "r/tags", m, tag); err != nil {
				t.Fatal(err)
			}
		}
		tags, more, err := s.Tags(ctx, "r/tags", 2, "")
		if err != nil || !more || !slices.Equal(tags, []string{"B", "a"}) {
			t.Fatalf("page 1 = %v, %v, %v", tags, more, err)
		}
		tags, more, err = s.Tags(ctx, "r/tags", 2, "a")
		if err != nil || more || !slices.Equal(tags, []string{"b", "c"}) {
			t.Fatalf("page 2 = %v, %v, %v", tags, more, err)
		}
		if err := s.DeleteTag(ctx, "r/tags", "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteTag(ctx, "r/tags", "b"); !errors.Is(err, meta.ErrManifestUnknown) {
			t.Fatalf("second DeleteTag = %v", err)
		}
		if tags, _, err := s.Tags(ctx, "r/tags", -1, ""); err != nil || !slices.Equal(tags, []string{"B", "a", "c"}) {
			t.Fatalf("all tags = %v, %v", tags, err)
		}
		if _, _, err := s.Tags(ctx, "r/none", -1, ""); !errors.Is(err, meta.ErrRepositoryUnknown) {
			t.Fatalf("tags of unknown repo = %v", err)
		}
		names, more, err := s.Catalog(ctx, 1, "r/one")
		if err != nil || !more || !slices.Equal(names, []string{"r/tags"}) {
			t.Fatalf("catalog = %v, %v, %v", names, more, err)
		}
	})

	t.Run("uploads", func(t *testing.T) {
		if err := s.CreateUpload(ctx, "r/up", "u1", "nobody", 0); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetUpload(ctx, "r/other", "u1", 0); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("upload in another repo = %v", err)
		}
		if u, err := s.GetUpload(ctx, "r/up", "u1", time.Hour); err != nil || u.Account != "" || u.Offset != 0 || u.Updated.IsZero() {
			t.Fatalf("GetUpload = %+v, %v", u, err)
		}
		// Offsets advance only from the recorded one.
		if err := s.AdvanceUpload(ctx, "r/up", "u1", 0, 5); err != nil {
			t.Fatal(err)
		}
		if err := s.AdvanceUpload(ctx, "r/up", "u1", 0, 9); !errors.Is(err, meta.ErrUploadConflict) {
			t.Fatalf("AdvanceUpload from a stale offset = %v", err)
		}
		if err := s.AdvanceUpload(ctx, "r/other", "u1", 5, 9); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("AdvanceUpload in another repo = %v", err)
		}
		if u, err := s.GetUpload(ctx, "r/up", "u1", 0); err != nil || u.Offset != 5 {
			t.Fatalf("GetUpload after advancing = %+v, %v", u, err)
		}
		if err := s.CompleteUpload(ctx, "r/up", "u1", digest('c'), 3); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetUpload(ctx, "r/up", "u1", 0); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("committed upload still exists: %v", err)
		}
		if n, err := s.BlobSize(ctx, "r/up", digest('c')); err != nil || n != 3 {
			t.Fatalf("committed blob = %d, %v", n, err)
		}
		if err := s.AdvanceUpload(ctx, "r/up", "u1", 5, 9); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("AdvanceUpload after commit = %v", err)
		}
		// Completing a session that ended meanwhile still records the blob.
		if err := s.CompleteUpload(ctx, "r/up", "gone", digest('d'), 4); err != nil {
			t.Fatal(err)
		}
		if n, err := s.BlobSize(ctx, "r/up", digest('d')); err != nil || n != 4 {
			t.Fatalf("blob of an ended session = %d, %v", n, err)
		}
		if err := s.CreateUpload(ctx, "r/up", "u2", "", 0); err != nil {
			t.Fatal(err)
		}
		if err := s.EndUpload(ctx, "r/other", "u2"); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("EndUpload in another repo = %v", err)
		}
		if err := s.EndUpload(ctx, "r/up", "u2"); err != nil {
			t.Fatal(err)
		}
		if err := s.EndUpload(ctx, "r/up", "u2"); !errors.Is(err, meta.ErrUploadUnknown) {
			t.Fatalf("second EndUpload = %v", err)
		}
	})
}

func TestGC(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	held, linked, gone := digest('c'), digest('d'), digest('e')
	for _, d := range []string{linked, gone} {
		if err := s.PutBlob(ctx, "r/gc", d, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.HoldBlob(ctx, held); err != nil {
		t.Fatal(err)
	}
	g, err := s.BeginGC(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := s.BeginGC(ctx); !errors.Is(err, meta.ErrGCBusy) {
		t.Fatalf("second BeginGC = %v", err)
	}
	live := func(cutoff time.Time) []string {
		var ds []string
		if err := g.Live(ctx, cutoff, func(d string) error { ds = append(ds, d); return nil }); err != nil {
			t.Fatal(err)
		}
		slices.Sort(ds)
		return ds
	}
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if got, want := live(past), []string{held, linked, gone}; !slices.Equal(got, want) {
		t.Fatalf("Live(recent) = %v, want %v", got, want)
	}
	if got := live(future); len(got) != 0 {
		t.Fatalf("Live(all old) = %v", got)
	}
	m := meta.Manifest{Digest: digest('9'), MediaType: "application/vnd.oci.image.manifest.v1+json", Content: []byte("m"),
		Blobs: []string{linked}}
	if err := s.PutManifest(ctx, "r/gc", m, ""); err != nil {
		t.Fatal(err)
	}
	removed := map[string]bool{}
	sweep := func(d string, cutoff time.Time) bool {
		ok, err := g.Sweep(ctx, d, cutoff, func(context.Context) error { removed[d] = true; return nil })
		if err != nil {
			t.Fatal(err)
		}
		if ok != removed[d] {
			t.Fatalf("Sweep(%s) = %v but remove called: %v", d, ok, removed[d])
		}
		return ok
	}
	if sweep(gone, past) || sweep(held, past) {
		t.Fatal("Sweep removed a recent blob")
	}
	if sweep(linked, future) {
		t.Fatal("Sweep removed a blob a manifest references")
	}
	if !sweep(gone, future) || !sweep(held, future) {
		t.Fatal("Sweep kept garbage")
	}
	if _, err := s.BlobSize(ctx, "r/gc", gone); !errors.Is(err, meta.ErrBlobUnknown) {
		t.Fatalf("swept blob still linked: %v", err)
	}
	if err := s.HoldBlob(ctx, held); err != nil {
		t.Fatal(err)
	}
	if n, err := g.PurgeHolds(ctx, future); err != nil || n != 1 {
		t.Fatalf("PurgeHolds = %d, %v", n, err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if g2, err := s.BeginGC(ctx); err != nil {
		t.Fatalf("BeginGC after Close = %v", err)
	} else {
		g2.Close()
	}
}

// TestAdvanceUploadRace: of writers that read the same offset, exactly one
// records its new offset; the others learn of the conflict.
func TestAdvanceUploadRace(t *testing.T) {
	s := newStore(t)
	ctx := context.Background()
	if err := s.CreateUpload(ctx, "r/race", "u", "", 0); err != nil {
		t.Fatal(err)
	}
	const n = 8
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- s.AdvanceUpload(ctx, "r/race", "u", 0, int64(10+i)) }()
	}
	won := 0
	for range n {
		err := <-errs
		switch {
		case err == nil:
			won++
		case !errors.Is(err, meta.ErrUploadConflict):
			t.Errorf("AdvanceUpload: %v", err)
		}
	}
	u, err := s.GetUpload(ctx, "r/race", "u", 0)
	if won != 1 || err != nil || u.Offset < 10 {
		t.Fatalf("%d writers won; session %+v, %v", won, u, err)
	}
}

// TestUploadSessionsOfAccounts: session limits and usage per account, and
// the queries of sweeps.
func TestUploadSessionsOfAccounts(t *testing.T) {
	pool := testenv.RegistryDB(t)
	s := meta.New(pool)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `insert into accounts (name, role) values ('a', 'isv'), ('b', 'isv')`); err != nil {
		t.Fatal(err)
	}
	// Concurrent creations stop at the limit exactly.
	errs := make(chan error, 6)
	for i := range 6 {
		go func() { errs <- s.CreateUpload(ctx, "a/img", fmt.Sprintf("a%d", i), "a", 4) }()
	}
	created := 0
	for range 6 {
		switch err := <-errs; {
		case err == nil:
			created++
		case !errors.Is(err, meta.ErrTooManyUploads):
			t.Fatal(err)
		}
	}
	if created != 4 {
		t.Fatalf("%d sessions created, want 4", created)
	}
	if err := s.CreateUpload(ctx, "a/img", "b0", "b", 4); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateUpload(ctx, "a/img", "n0", "", 4); err != nil {
		t.Fatal(err)
	}
	u, err := s.GetUpload(ctx, "a/img", "b0", 0)
	if err != nil || u.Account != "b" {
		t.Fatalf("GetUpload = %+v, %v", u, err)
	}
	if err := s.AdvanceUpload(ctx, "a/img", "b0", 0, 100); err != nil {
		t.Fatal(err)
	}
	for acct, want := range map[string]meta.UploadUsage{"a": {Sessions: 4}, "b": {Sessions: 1, Staged: 100}, "": {Sessions: 1}, "unknown": {Sessions: 1}} {
		if got, err := s.AccountUploads(ctx, acct); err != nil || got != want {
			t.Errorf("AccountUploads(%q) = %+v, %v; want %+v", acct, got, err, want)
		}
	}

	// Expiry by inactivity; touching keeps a session alive.
	if _, err := pool.Exec(ctx, `update upload_sessions set updated_at = now() - interval '2 hours' where id in ('b0', 'n0')`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetUpload(ctx, "a/img", "b0", time.Hour); !errors.Is(err, meta.ErrUploadUnknown) {
		t.Fatalf("GetUpload of an idle session = %v", err)
	}
	if err := s.TouchUploads(ctx, []string{"n0"}); err != nil {
		t.Fatal(err)
	}
	expired, err := s.ExpireUploads(ctx, time.Hour)
	if err != nil || !slices.Equal(expired, []string{"b0"}) {
		t.Fatalf("ExpireUploads = %v, %v", expired, err)
	}
	keys, err := s.StagedKeys(ctx)
	if err != nil || len(keys) != 5 || keys["b0"] || !keys["n0"] {
		t.Fatalf("StagedKeys = %v, %v", keys, err)
	}
}
