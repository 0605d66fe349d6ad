package gc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/blob/s3store"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/gc"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// env is a registry API on real PostgreSQL and a real directory store, and
// the same store as the collection sees it, with hooks on its Stat and
// Delete to interleave pushes with the sweep.
type env struct {
	t     *testing.T
	pool  *pgxpool.Pool
	meta  *meta.Store
	store blob.Store
	gcs   *hookStore
	url   string
}

// stores are the blob stores the race test runs on.
var stores = []struct {
	name string
	open func(t *testing.T) blob.Store
}{
	{"dirstore", func(t *testing.T) blob.Store {
		st, err := dirstore.New(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return st
	}},
	{"s3store", func(t *testing.T) blob.Store {
		s3 := testenv.MinIO(t)
		c, err := minio.New(s3.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""), Region: s3.Region})
		if err != nil {
			t.Fatal(err)
		}
		st := s3store.New(c, "registry", s3store.Options{})
		if err := st.EnsureBucket(context.Background(), s3.Region); err != nil {
			t.Fatal(err)
		}
		return st
	}},
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOn(t, stores[0].open(t))
}

func newEnvOn(t *testing.T, st blob.Store) *env {
	t.Helper()
	pool := testenv.RegistryDB(t)
	m := meta.New(pool)
	h, err := distribution.New(distribution.Config{Meta: m, Blobs: st, Authorizer: distribution.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &env{t: t, pool: pool, meta: m, store: st, gcs: &hookStore{Store: st}, url: srv.URL}
}

// hookStore calls onStat after a Stat (which then reports the state
// before the hook) and onDelete before a Delete, once each for the digest
// they name.
type hookStore struct {
	blob.Store
	mu               sync.Mutex
	onStat, onDelete map[blob.Digest]func()
}

func (h *hookStore) hook(m *map[blob.Digest]func(), d blob.Digest, fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if *m == nil {
		*m = map[blob.Digest]func(){}
	}
	(*m)[d] = fn
}

func (h *hookStore) take(m map[blob.Digest]func(), d blob.Digest) func() {
	h.mu.Lock()
	defer h.mu.Unlock()
	fn := m[d]
	delete(m, d)
	return fn
}

func (h *hookStore) Stat(ctx context.Context, d blob.Digest) (blob.Info, error) {
	info, err := h.Store.Stat(ctx, d)
	if fn := h.take(h.onStat, d); fn != nil {
		fn()
	}
	return info, err
}

func (h *hookStore) Delete(ctx context.Context, d blob.Digest) error {
	if fn := h.take(h.onDelete, d); fn != nil {
		fn()
	}
	return h.Store.Delete(ctx, d)
}

func (e *env) do(method, path, ctype string, body []byte) (int, []byte, http.Header) {
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if err != nil {
		e.t.Error(err)
		return 0, nil, nil
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func randomBytes(n int) []byte {
	p := make([]byte, n)
	rand.Read(p)
	return p
}

// pushMonolithic uploads p into repo in one POST and returns its digest and
// the status of the answer (201 on success).
func (e *env) pushMonolithic(repo string, p []byte) (blob.Digest, int) {
	d := blob.FromBytes(p)
	code, body, _ := e.do(http.MethodPost, "/v2/"+repo+"/blobs/uploads/?digest="+string(d), "application/octet-stream", p)
	if code != http.StatusCreated {
		e.t.Logf("monolithic push of %s: %d %s", d, code, body)
	}
	return d, code
}

// pushChunked uploads p into repo with POST, PATCH and PUT.
func (e *env) pushChunked(repo string, p []byte) (blob.Digest, int) {
	d := blob.FromBytes(p)
	code, body, h := e.do(http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil)
	if code != http.StatusAccepted {
		e.t.Errorf("start upload: %d %s", code, body)
		return d, code
	}
	loc := h.Get("Location")
	code, body, _ = e.do(http.MethodPatch, loc, "application/octet-stream", p)
	if code != http.StatusAccepted {
		e.t.Errorf("patch: %d %s", code, body)
		return d, code
	}
	code, body, _ = e.do(http.MethodPut, loc+"?digest="+string(d), "application/octet-stream", nil)
	if code != http.StatusCreated {
		e.t.Logf("put %s: %d %s", d, code, body)
	}
	return d, code
}

func desc(mediaType string, d blob.Digest, size int) map[string]any {
	return map[string]any{"mediaType": mediaType, "digest": string(d), "size": size}
}

// putManifest stores an image manifest of config and layers in repo under
// ref and returns its digest and the status.
func (e *env) putManifest(repo, ref string, config blob.Digest, configSize int, layers map[blob.Digest]int) (blob.Digest, int, []byte) {
	var ls []map[string]any
	keys := make([]blob.Digest, 0, len(layers))
	for d := range layers {
		keys = append(keys, d)
	}
	slices.Sort(keys)
	for _, d := range keys {
		ls = append(ls, desc("application/vnd.oci.image.layer.v1.tar", d, layers[d]))
	}
	doc, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        desc("application/vnd.oci.image.config.v1+json", config, configSize),
		"layers":        ls,
	})
	code, body, _ := e.do(http.MethodPut, "/v2/"+repo+"/manifests/"+ref, "application/vnd.oci.image.manifest.v1+json", doc)
	return blob.FromBytes(doc), code, body
}

// readable reports whether the registry serves d from repo with its bytes.
func (e *env) readable(repo string, d blob.Digest) bool {
	code, body, _ := e.do(http.MethodGet, "/v2/"+repo+"/blobs/"+string(d), "", nil)
	return code == http.StatusOK && blob.FromBytes(body) == d
}

// run collects with a grace period of one hour on a clock an hour ahead:
// everything before the call is old, everything during it recent.
func (e *env) run(opt gc.Options) gc.Report {
	e.t.Helper()
	opt.GracePeriod = time.Hour
	opt.Now = func() time.Time { return time.Now().Add(time.Hour) }
	rep, err := gc.Run(context.Background(), e.meta, e.gcs, opt)
	if err != nil {
		e.t.Fatalf("gc: %v", err)
	}
	return rep
}

// consistent checks the invariant the collection must keep: every blob a
// manifest references, and every recorded blob, has its bytes.
func (e *env) consistent() {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `select blob_digest from manifest_blobs union select digest from blobs`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			e.t.Fatal(err)
		}
		if _, err := e.store.Stat(context.Background(), blob.Digest(d)); err != nil {
			e.t.Errorf("%s is recorded or referenced but its bytes are gone: %v", d, err)
		}
	}
}

func removed(rep gc.Report) []string {
	var out []string
	for _, b := range rep.Blobs {
		out = append(out, b.Digest)
	}
	slices.Sort(out)
	return out
}

func TestRun(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	cfg, layer := randomBytes(100), randomBytes(1000)
	dc, _ := e.pushMonolithic("isv/app", cfg)
	dl, _ := e.pushChunked("isv/app", layer)
	if _, code, body := e.putManifest("isv/app", "v1", dc, len(cfg), map[blob.Digest]int{dl: len(layer)}); code != http.StatusCreated {
		t.Fatalf("manifest: %d %s", code, body)
	}
	// An untagged manifest keeps its blobs too.
	ucfg := randomBytes(50)
	duc, _ := e.pushMonolithic("isv/app", ucfg)
	udig, code, body := e.putManifest("isv/app", "v-tmp", duc, len(ucfg), nil)
	if code != http.StatusCreated {
		t.Fatalf("manifest: %d %s", code, body)
	}
	if code, body, _ := e.do(http.MethodDelete, "/v2/isv/app/manifests/v-tmp", "", nil); code != http.StatusAccepted {
		t.Fatalf("untag: %d %s", code, body)
	}
	if code, _, _ := e.do(http.MethodGet, "/v2/isv/app/manifests/"+string(udig), "", nil); code != http.StatusOK {
		t.Fatalf("untagged manifest by digest: %d", code)
	}
	// Garbage: a blob no manifest references, a blob whose manifest was
	// deleted, bytes without a row, and an upload nobody finished.
	lone, _ := e.pushMonolithic("isv/app", randomBytes(300))
	ocfg := randomBytes(70)
	doc, _ := e.pushMonolithic("isv/old", ocfg)
	odig, code, body := e.putManifest("isv/old", "v0", doc, len(ocfg), nil)
	if code != http.StatusCreated {
		t.Fatalf("manifest: %d %s", code, body)
	}
	if code, body, _ := e.do(http.MethodDelete, "/v2/isv/old/manifests/"+string(odig), "", nil); code != http.StatusAccepted {
		t.Fatalf("delete manifest: %d %s", code, body)
	}
	up, err := e.store.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	orphanBytes := randomBytes(400)
	if _, err := up.Write(ctx, bytes.NewReader(orphanBytes)); err != nil {
		t.Fatal(err)
	}
	orphan := blob.FromBytes(orphanBytes)
	if _, err := up.Commit(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	stale, err := e.store.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	garbage := []string{string(lone), string(doc), string(orphan)}
	slices.Sort(garbage)

	// A recent blob stays whatever references it.
	rep, err := gc.Run(ctx, e.meta, e.gcs, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Blobs) != 0 || len(rep.Uploads) != 0 || rep.Scanned != 6 {
		t.Fatalf("within the grace period: %+v", rep)
	}

	rep = e.run(gc.Options{DryRun: true, UploadTTL: time.Minute})
	if got := removed(rep); !slices.Equal(got, garbage) || !rep.DryRun || len(rep.Uploads) != 1 || rep.Uploads[0].ID != stale.ID() {
		t.Fatalf("dry run reported %v and %+v, want %v and upload %s", got, rep.Uploads, garbage, stale.ID())
	}
	if rep.FreedBytes != 300+70+400 || rep.Live != 3 || rep.Scanned != 6 {
		t.Fatalf("dry run: %+v", rep)
	}
	if !e.readable("isv/app", lone) || !e.readable("isv/old", doc) {
		t.Fatal("dry run removed blobs")
	}
	if _, err := e.store.Resume(ctx, stale.ID()); err != nil {
		t.Fatalf("dry run aborted the upload: %v", err)
	}

	rep = e.run(gc.Options{UploadTTL: time.Minute})
	if got := removed(rep); !slices.Equal(got, garbage) || rep.DryRun || len(rep.Uploads) != 1 {
		t.Fatalf("collection removed %v and %+v, want %v", got, rep.Uploads, garbage)
	}
	for _, d := range []blob.Digest{dc, dl, duc} {
		if !e.readable("isv/app", d) {
			t.Errorf("live blob %s gone", d)
		}
	}
	for _, g := range garbage {
		if _, err := e.store.Stat(ctx, blob.Digest(g)); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("garbage %s still stored: %v", g, err)
		}
	}
	// The links went with the bytes: the API no longer offers the blob.
	if code, _, _ := e.do(http.MethodHead, "/v2/isv/app/blobs/"+string(lone), "", nil); code != http.StatusNotFound {
		t.Errorf("HEAD of a collected blob: %d", code)
	}
	if _, err := e.store.Resume(ctx, stale.ID()); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("stale upload survived: %v", err)
	}
	e.consistent()

	// Nothing left to do; pushing the collected blob again works.
	if rep := e.run(gc.Options{}); len(rep.Blobs) != 0 {
		t.Fatalf("second run removed %v", removed(rep))
	}
	if _, code := e.pushMonolithic("isv/app", randomBytes(1)); code != http.StatusCreated {
		t.Fatal("push after gc")
	}
}

func TestRunBusy(t *testing.T) {
	e := newEnv(t)
	g, err := e.meta.BeginGC(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(context.Background(), e.meta, e.store, gc.Options{}); !errors.Is(err, meta.ErrGCBusy) {
		t.Fatalf("second collection: %v, want ErrGCBusy", err)
	}
	if err := g.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(context.Background(), e.meta, e.store, gc.Options{}); err != nil {
		t.Fatalf("after the first ended: %v", err)
	}
}

// TestPushDuringSweep interleaves pushes with the sweep of the very blob
// they push, at the points where a check-then-delete collector loses data,
// on both blob stores.
func TestPushDuringSweep(t *testing.T) {
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) { testPushDuringSweep(t, newEnvOn(t, st.open(t))) })
	}
}

func testPushDuringSweep(t *testing.T, e *env) {
	cfg := randomBytes(64)
	dc, _ := e.pushMonolithic("isv/app", cfg)
	if _, code, body := e.putManifest("isv/app", "base", dc, len(cfg), nil); code != http.StatusCreated {
		t.Fatalf("manifest: %d %s", code, body)
	}
	// Old blobs that no manifest references: each is about to be swept
	// when a push comes.
	var ds [5]blob.Digest
	var ps [5][]byte
	for i := range ds {
		ps[i] = randomBytes(500 + i)
		ds[i], _ = e.pushMonolithic("isv/app", ps[i])
	}

	// 0: the same bytes pushed again after the mark, before the sweep.
	e.gcs.hook(&e.gcs.onStat, ds[0], func() {
		if _, code := e.pushMonolithic("isv/app", ps[0]); code != http.StatusCreated {
			t.Errorf("re-push during gc: %d", code)
		}
	})
	// 1: a manifest referencing the (old, linked) blob after the mark.
	e.gcs.hook(&e.gcs.onStat, ds[1], func() {
		if _, code, body := e.putManifest("isv/app", "v1", dc, len(cfg), map[blob.Digest]int{ds[1]: len(ps[1])}); code != http.StatusCreated {
			t.Errorf("manifest during gc: %d %s", code, body)
		}
	})
	// 2: the same bytes pushed again (chunked) while the sweep deletes
	// them: the push must wait for the sweep and then store them anew.
	pushed := make(chan int, 1)
	e.gcs.hook(&e.gcs.onDelete, ds[2], func() {
		go func() { _, code := e.pushChunked("isv/app", ps[2]); pushed <- code }()
		e.waitBlockedOrDone(pushed)
	})
	// 3: a manifest put while the sweep deletes the blob's bytes: it waits
	// for the sweep and is then refused, never stored pointing at removed
	// bytes.
	lateDone := make(chan int, 1)
	e.gcs.hook(&e.gcs.onDelete, ds[3], func() {
		go func() {
			_, code, _ := e.putManifest("isv/app", "late", dc, len(cfg), map[blob.Digest]int{ds[3]: len(ps[3])})
			lateDone <- code
		}()
		e.waitBlockedOrDone(lateDone)
	})

	rep := e.run(gc.Options{})
	if code := <-pushed; code != http.StatusCreated {
		t.Fatalf("push racing the sweep: %d", code)
	}
	late := <-lateDone
	if got, want := removed(rep), []string{string(ds[2]), string(ds[3]), string(ds[4])}; !slices.Equal(got, sorted(want)) {
		t.Errorf("removed %v, want %v", got, sorted(want))
	}
	for _, i := range []int{0, 1, 2} {
		if !e.readable("isv/app", ds[i]) {
			t.Errorf("blob %d, pushed or referenced during the collection, is lost", i)
		}
	}
	if late != http.StatusBadRequest {
		t.Errorf("manifest put racing the removal of its blob: %d, want 400", late)
	}
	e.consistent()
}

func sorted(s []string) []string { slices.Sort(s); return s }

// waitBlockedOrDone returns once a session waits for an advisory lock (the
// push waits for the sweep) or the push finished (it did not wait).
func (e *env) waitBlockedOrDone(done chan int) {
	for {
		select {
		case code := <-done:
			done <- code
			return
		default:
		}
		var n int
		if err := e.pool.QueryRow(context.Background(),
			`select count(*) from pg_locks where locktype = 'advisory' and not granted`).Scan(&n); err != nil {
			e.t.Error(err)
			return
		}
		if n > 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(gc.Report{Blobs: []gc.Blob{{"sha256:x", 1}}, Uploads: []gc.Stale{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"dry_run":false`, `"removed_blobs":[{"digest":"sha256:x","size":1}]`, `"aborted_uploads":[]`, `"freed_bytes":0`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("report JSON %s lacks %s", b, k)
		}
	}
}

// TestConcurrentPushesAndCollections pushes the same few blobs and
// manifests from several goroutines while collections run back to back,
// with every blob older than the grace period as soon as a collection
// starts: no collection may fail (deadlocks, foreign keys), and afterwards
// every recorded or referenced blob must have its bytes. (The narrow races
// are TestPushDuringSweep's; this one rarely hits them.)
func TestConcurrentPushesAndCollections(t *testing.T) {
	e := newEnv(t)
	contents := make([][]byte, 4)
	for i := range contents {
		contents[i] = randomBytes(200 + i)
	}
	cfg := randomBytes(32)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var pushes, manifests, collected int
	var mu sync.Mutex
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				p := contents[(w+i)%len(contents)]
				push := e.pushMonolithic
				if i%2 == 1 {
					push = e.pushChunked
				}
				dc, c1 := e.pushMonolithic("isv/app", cfg)
				d, c2 := push("isv/app", p)
				if c1 != http.StatusCreated || c2 != http.StatusCreated {
					t.Errorf("push: %d, %d", c1, c2)
					return
				}
				_, code, body := e.putManifest("isv/app", fmt.Sprintf("w%d", w), dc, len(cfg), map[blob.Digest]int{d: len(p)})
				mu.Lock()
				pushes++
				if code == http.StatusCreated {
					manifests++
				}
				mu.Unlock()
				// Refused only when a collection took a blob between the
				// push and the manifest, which the grace period prevents
				// in real use and this test's clock does not.
				if code != http.StatusCreated && code != http.StatusBadRequest {
					t.Errorf("manifest: %d %s", code, body)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			rep, err := gc.Run(context.Background(), e.meta, e.gcs,
				gc.Options{GracePeriod: time.Hour, Now: func() time.Time { return time.Now().Add(time.Hour) }})
			if err != nil {
				t.Errorf("gc: %v", err)
				return
			}
			mu.Lock()
			collected += len(rep.Blobs)
			mu.Unlock()
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	t.Logf("%d pushes, %d manifests stored, %d blobs collected meanwhile", pushes, manifests, collected)
	e.consistent()
	// Every stored manifest's blobs are served.
	rows, err := e.pool.Query(context.Background(), `select distinct blob_digest from manifest_blobs`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		if !e.readable("isv/app", blob.Digest(d)) {
			t.Errorf("%s, referenced by a manifest, is not served", d)
		}
	}
}
