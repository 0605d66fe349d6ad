package main

// Fault tests: the registry runs as a real process (this test binary
// re-executed, see TestMain) on a real PostgreSQL and blob store, and is
// SIGKILLed in the middle of chunked uploads and of a validation job, then
// restarted on the same database and data directory.

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell"
)

const (
	faultISV   = "isv1"
	faultISVPW = "fault-isv-password-1"
	chunkSize  = 1 << 20
)

func dbPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func randomBlob(seed uint64, n int) ([]byte, string) {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	sum := sha256.Sum256(b)
	return b, "sha256:" + hex.EncodeToString(sum[:])
}

// uploader speaks the blob upload API with a bearer token.
type uploader struct {
	t    *testing.T
	ctx  context.Context
	base string
	tok  string
	repo string
}

func newUploader(t *testing.T, ctx context.Context, p *proc, repo string) *uploader {
	t.Helper()
	return &uploader{t: t, ctx: ctx, base: p.url, repo: repo,
		tok: token(t, ctx, p.url, faultISV, faultISVPW, "repository:"+repo+":pull,push")}
}

func (u *uploader) hdr(kv ...string) http.Header {
	h := http.Header{"Authorization": {"Bearer " + u.tok}}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func (u *uploader) do(method, pathOrURL string, hdr http.Header, body []byte) (*http.Response, []byte) {
	u.t.Helper()
	url := pathOrURL
	if strings.HasPrefix(url, "/") {
		url = u.base + url
	}
	resp, b, err := request(u.ctx, method, url, hdr, body)
	if err != nil {
		u.t.Fatalf("%s %s: %v", method, pathOrURL, err)
	}
	return resp, b
}

// begin starts an upload session and returns its location (a path).
func (u *uploader) begin() string {
	u.t.Helper()
	resp, b := u.do(http.MethodPost, "/v2/"+u.repo+"/blobs/uploads/", u.hdr(), nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusAccepted || !strings.HasPrefix(loc, "/v2/"+u.repo+"/blobs/uploads/") {
		u.t.Fatalf("POST upload: %d %q %s", resp.StatusCode, loc, b)
	}
	return loc
}

func contentRange(off, n int) string { return fmt.Sprintf("%d-%d", off, off+n-1) }

// rangeOffset parses a Range header "0-last" into the next offset.
func rangeOffset(t *testing.T, r string) int {
	t.Helper()
	a, b, ok := strings.Cut(r, "-")
	last, err := strconv.Atoi(b)
	if !ok || a != "0" || err != nil {
		t.Fatalf("Range header %q", r)
	}
	if last == 0 {
		return 0 // "0-0": nothing (or one byte; not used by these tests)
	}
	return last + 1
}

func (u *uploader) patch(loc string, off int, data []byte) {
	u.t.Helper()
	resp, b := u.do(http.MethodPatch, loc, u.hdr("Content-Range", contentRange(off, len(data)),
		"Content-Type", "application/octet-stream"), data)
	if resp.StatusCode != http.StatusAccepted {
		u.t.Fatalf("PATCH at %d: %d %s", off, resp.StatusCode, b)
	}
	if got := rangeOffset(u.t, resp.Header.Get("Range")); got != off+len(data) {
		u.t.Fatalf("PATCH at %d: Range %q, want offset %d", off, resp.Header.Get("Range"), off+len(data))
	}
}

func (u *uploader) put(loc string, off int, data []byte, digest string) {
	u.t.Helper()
	hdr := u.hdr("Content-Type", "application/octet-stream")
	if len(data) > 0 {
		hdr.Set("Content-Range", contentRange(off, len(data)))
	}
	resp, b := u.do(http.MethodPut, loc+"?digest="+digest, hdr, data)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Docker-Content-Digest") != digest {
		u.t.Fatalf("PUT: %d %q %s", resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), b)
	}
}

// status returns the offset of upload loc, or -1 when the registry does
// not know the upload (404).
func (u *uploader) status(loc string) int {
	u.t.Helper()
	resp, b := u.do(http.MethodGet, loc, u.hdr(), nil)
	switch resp.StatusCode {
	case http.StatusNoContent:
		return rangeOffset(u.t, resp.Header.Get("Range"))
	case http.StatusNotFound:
		return -1
	}
	u.t.Fatalf("upload status: %d %s", resp.StatusCode, b)
	return 0
}

// upload sends data[from:] to the upload at loc in chunks and commits it.
func (u *uploader) finish(loc string, from int, data []byte, digest string) {
	u.t.Helper()
	off := from
	for len(data)-off > chunkSize {
		u.patch(loc, off, data[off:off+chunkSize])
		off += chunkSize
	}
	u.put(loc, off, data[off:], digest)
}

// headBlob returns the status of HEAD of the blob and its digest header.
func (u *uploader) headBlob(digest string) (int, string, int64) {
	u.t.Helper()
	resp, _ := u.do(http.MethodHead, "/v2/"+u.repo+"/blobs/"+digest, u.hdr(), nil)
	return resp.StatusCode, resp.Header.Get("Docker-Content-Digest"), resp.ContentLength
}

// checkBlob checks that the blob is served with exactly want.
func (u *uploader) checkBlob(digest string, want []byte) {
	u.t.Helper()
	if code, d, n := u.headBlob(digest); code != http.StatusOK || d != digest || n != int64(len(want)) {
		u.t.Errorf("HEAD blob: %d %q %d, want 200 %q %d", code, d, n, digest, len(want))
	}
	resp, b := u.do(http.MethodGet, "/v2/"+u.repo+"/blobs/"+digest, u.hdr(), nil)
	if resp.StatusCode != http.StatusOK || !equalBytes(b, want) {
		u.t.Errorf("GET blob: %d, %d bytes, equal %v", resp.StatusCode, len(b), equalBytes(b, want))
	}
}

func equalBytes(a, b []byte) bool { return string(a) == string(b) }

// checkVisibleBlobs: every blob the registry lists for the repository is
// served whole, with content matching its digest (no partial blob is
// visible).
func (u *uploader) checkVisibleBlobs(pool *pgxpool.Pool) {
	u.t.Helper()
	rows, err := pool.Query(u.ctx, `select b.digest, b.size from repository_blobs rb join blobs b on b.digest = rb.digest
		join repositories r on r.id = rb.repository_id where r.name = $1`, u.repo)
	if err != nil {
		u.t.Fatal(err)
	}
	type row struct {
		Digest string
		Size   int64
	}
	blobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		u.t.Fatal(err)
	}
	for _, b := range blobs {
		resp, body := u.do(http.MethodGet, "/v2/"+u.repo+"/blobs/"+b.Digest, u.hdr(), nil)
		sum := sha256.Sum256(body)
		if resp.StatusCode != http.StatusOK || int64(len(body)) != b.Size || "sha256:"+hex.EncodeToString(sum[:]) != b.Digest {
			u.t.Errorf("visible blob %s: %d, %d bytes (want %d), content digest sha256:%x", b.Digest, resp.StatusCode, len(body), b.Size, sum)
		}
	}
}

// checkDirStore: every committed file of the directory blob store hashes
// to its name.
func checkDirStore(t *testing.T, dataDir string) {
	t.Helper()
	root := filepath.Join(dataDir, "blobs", "blobs", "sha256")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != d.Name() {
			t.Errorf("blob file %s holds content sha256:%x", p, sum)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

// streamThenKill sends method url with body data (Content-Length and
// Content-Range set), writes its first n bytes (all of them when n ==
// len(data)), waits (on the directory store) until some or all bytes
// reached the staged file, then SIGKILLs the registry.
func streamThenKill(t *testing.T, u *uploader, e *registryEnv, p *proc, pool *pgxpool.Pool, method, url string, off int, data []byte, n int) {
	t.Helper()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(u.ctx, method, u.base+url, pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	req.Header = u.hdr("Content-Range", contentRange(off, len(data)), "Content-Type", "application/octet-stream")
	type result struct {
		code int
		err  error
	}
	res := make(chan result, 1)
	go func() {
		resp, err := (&http.Client{}).Do(req)
		if err != nil {
			res <- result{0, err}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		res <- result{resp.StatusCode, nil}
	}()
	wrote := make(chan error, 1)
	go func() {
		_, err := pw.Write(data[:n])
		if err == nil && n == len(data) {
			err = pw.Close()
		}
		wrote <- err
	}()
	select {
	case err := <-wrote:
		if err != nil {
			t.Fatalf("writing the body: %v", err)
		}
	case <-time.After(opTimeout):
		t.Fatal("the registry did not read the body")
	}
	// The registry holds no transaction while a body arrives; on the
	// directory store the staged file shows it streaming. On S3 a body is
	// buffered in the registry until it ends (or fills a part), so any
	// moment after the bytes were sent is alike.
	if !hasS3(e) {
		// Wait (best effort) until the bytes sent reached the staged file,
		// so that the kill lands while they are in the store.
		staged := filepath.Join(e.dataDir, "blobs", "uploads", path.Base(strings.SplitN(url, "?", 2)[0]), "data")
		want := int64(off + n)
		if n < len(data) {
			want = int64(off + 1)
		}
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			if fi, err := os.Stat(staged); err == nil && fi.Size() >= want {
				break
			}
			time.Sleep(pollEvery)
		}
	}
	p.kill(t)
	pw.CloseWithError(errors.New("registry killed"))
	select {
	case r := <-res:
		if r.err == nil && r.code < 300 && n < len(data) {
			t.Errorf("%s with a truncated body succeeded: %d", method, r.code)
		}
		t.Logf("%s %s killed after %d of %d bytes: status %d, err %v", method, url, n, len(data), r.code, r.err)
	case <-time.After(opTimeout):
		t.Fatal("the request did not end after the kill")
	}
}

func hasS3(e *registryEnv) bool {
	for _, kv := range e.env {
		if strings.HasPrefix(kv, "FAAS_S3_ENDPOINT=") && kv != "FAAS_S3_ENDPOINT=" {
			return true
		}
	}
	return false
}

func TestFaultChunkedUploadDir(t *testing.T) {
	testFaultChunkedUpload(t, newRegistryEnv(t, testenv.Postgres(t).URL, t.TempDir()))
}

func TestFaultChunkedUploadS3(t *testing.T) {
	s3 := testenv.MinIO(t)
	testFaultChunkedUpload(t, newRegistryEnv(t, testenv.Postgres(t).URL, t.TempDir(),
		"FAAS_S3_ENDPOINT="+s3.Endpoint, "FAAS_S3_ACCESS_KEY="+s3.AccessKey,
		"FAAS_S3_SECRET_KEY="+s3.SecretKey, "FAAS_S3_BUCKET=fault-test"))
}

func testFaultChunkedUpload(t *testing.T, e *registryEnv) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	pool := dbPool(t, e.dbURL)
	e.usersAdd(faultISV, "isv", faultISVPW)
	const repo = faultISV + "/blobs"
	afterRestart := func(p *proc) *uploader {
		u := newUploader(t, ctx, p, repo)
		u.checkVisibleBlobs(pool)
		if !hasS3(e) {
			checkDirStore(t, e.dataDir)
		}
		return u
	}

	// 1. Killed in the middle of a PATCH: two chunks committed, the third
	// half sent.
	t.Run("patch", func(t *testing.T) {
		p := e.start()
		u := newUploader(t, ctx, p, repo)
		data, digest := randomBlob(1, 6*chunkSize+12345)
		loc := u.begin()
		u.patch(loc, 0, data[:chunkSize])
		u.patch(loc, chunkSize, data[chunkSize:2*chunkSize])
		const committed, sent = 2 * chunkSize, chunkSize / 2
		streamThenKill(t, u, e, p, pool, http.MethodPatch, loc, committed, data[committed:committed+chunkSize], sent)

		p = e.start()
		u = afterRestart(p)
		if code, _, _ := u.headBlob(digest); code != http.StatusNotFound {
			t.Errorf("HEAD of the unfinished blob after the crash: %d, want 404", code)
		}
		off := u.status(loc)
		t.Logf("upload status after the crash: offset %d (committed %d, sent %d more)", off, committed, sent)
		switch {
		case off < 0: // cleanly restartable
			loc = u.begin()
			u.finish(loc, 0, data, digest)
		case off >= committed && off <= committed+sent: // resumable
			u.finish(loc, off, data, digest)
		default:
			t.Fatalf("upload offset %d after the crash, want 404 or within [%d, %d]", off, committed, committed+sent)
		}
		u.checkBlob(digest, data)
		if n := u.status(loc); n != -1 {
			t.Errorf("upload still known after its PUT: offset %d", n)
		}
		p.kill(t)
	})

	// 2. Killed during the final PUT: in the middle of its body, and once
	// the whole body was sent (the kill then races the digest check and
	// the commit).
	for i, whole := range []bool{false, true} {
		t.Run(fmt.Sprintf("put/whole-body=%v", whole), func(t *testing.T) {
			p := e.start()
			u := newUploader(t, ctx, p, repo)
			data, digest := randomBlob(uint64(10+i), 4*chunkSize+777)
			loc := u.begin()
			const committed = 3 * chunkSize
			for off := 0; off < committed; off += chunkSize {
				u.patch(loc, off, data[off:off+chunkSize])
			}
			last := data[committed:]
			n := len(last) / 2
			if whole {
				n = len(last)
			}
			streamThenKill(t, u, e, p, pool, http.MethodPut, loc+"?digest="+digest, committed, last, n)

			p = e.start()
			u = afterRestart(p)
			code, d, size := u.headBlob(digest)
			switch code {
			case http.StatusOK:
				if !whole {
					t.Errorf("blob visible although its PUT body was cut")
				}
				if d != digest || size != int64(len(data)) {
					t.Errorf("blob after the crash: digest %q size %d, want %q %d", d, size, digest, len(data))
				}
				t.Log("the blob was committed before the kill")
			case http.StatusNotFound:
				off := u.status(loc)
				t.Logf("blob absent after the crash; upload offset %d", off)
				switch {
				case off < 0:
					loc = u.begin()
					u.finish(loc, 0, data, digest)
				case off >= committed && off <= committed+n:
					u.finish(loc, off, data, digest)
				default:
					t.Fatalf("upload offset %d after the crash, want 404 or within [%d, %d]", off, committed, committed+n)
				}
			default:
				t.Fatalf("HEAD blob after the crash: %d", code)
			}
			u.checkBlob(digest, data)
			p.kill(t)
		})
	}
	e.checkNoRace()
}

// buildImage builds a two-chip loopback image of the given version.
func buildImage(t *testing.T, version string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "name: loopback2\nversion: %s\nvendor: Test\nboard: faas-vu9p-dual\nboth_chips: true\nchips:\n", version)
	for i := range 2 {
		bit, err := loopback.Bitstream(shell.PartVU9P, (64+i)<<10)
		if err != nil {
			t.Fatal(err)
		}
		file := fmt.Sprintf("chip%d.bit", i)
		if err := os.WriteFile(filepath.Join(dir, file), bit, 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&yaml, "  - {index: %d, bitstream: %s, role: {name: loopback, version: \"1.0\"}}\n", i, file)
	}
	if err := os.WriteFile(filepath.Join(dir, "image.yaml"), []byte(yaml.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	img, err := image.Build(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

type jobState struct {
	ID         string
	State      string
	Attempts   int
	LeaseOwner *string
	Finished   *time.Time
	Reasons    string
}

func readJob(t *testing.T, ctx context.Context, pool *pgxpool.Pool, repo, digest string) jobState {
	t.Helper()
	var j jobState
	err := pool.QueryRow(ctx, `select j.id::text, j.state, j.attempts, j.lease_owner, j.finished_at, j.reasons::text
		from validation_jobs j join repositories r on r.id = j.repository_id
		where r.name = $1 and j.manifest_digest = $2`, repo, digest).
		Scan(&j.ID, &j.State, &j.Attempts, &j.LeaseOwner, &j.Finished, &j.Reasons)
	if err != nil {
		t.Fatalf("job of %s@%s: %v", repo, digest, err)
	}
	return j
}

// locker holds a lock in a transaction of its own connection.
type locker struct {
	conn *pgx.Conn
	tx   pgx.Tx
	pid  uint32
}

func lock(t *testing.T, ctx context.Context, url, stmt string, args ...any) *locker {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	l := &locker{conn: conn, pid: conn.PgConn().PID()}
	if l.tx, err = conn.Begin(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.tx.Exec(ctx, stmt, args...); err != nil {
		t.Fatal(err)
	}
	return l
}

// blocked counts the backends waiting for l's locks.
func (l *locker) blocked(ctx context.Context, pool *pgxpool.Pool) (int, error) {
	var n int
	err := pool.QueryRow(ctx, `select count(*) from pg_stat_activity where $1 = any(pg_blocking_pids(pid))`, int(l.pid)).Scan(&n)
	return n, err
}

// release ends l's transaction. The backends still waiting for its locks
// belong to the killed registry: PostgreSQL does not notice a dead client
// while a statement waits for a lock, and would run the statement to
// completion (commit included) once the lock is free. They are terminated
// first, as they would be by a connection check in production.
func (l *locker) release(t *testing.T, ctx context.Context, pool *pgxpool.Pool, terminateWaiters bool) {
	t.Helper()
	if terminateWaiters {
		if _, err := pool.Exec(ctx, `select pg_terminate_backend(pid) from pg_stat_activity where $1 = any(pg_blocking_pids(pid))`, int(l.pid)); err != nil {
			t.Fatal(err)
		}
		poll(t, opTimeout, "the killed registry's backends to end", func() (bool, error) {
			n, err := l.blocked(ctx, pool)
			return n == 0, err
		})
	}
	if err := l.tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestFaultValidation kills the registry while a validation job runs:
// once before the countersignature is pushed (the worker waits for the
// ISV's signing keys) and once after it was pushed but before the job is
// marked available. After a restart the job is run again once its lease
// expires and completes once, with exactly one countersignature.
func TestFaultValidation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	pg := testenv.Postgres(t)
	e := newRegistryEnv(t, pg.URL, t.TempDir())
	pool := dbPool(t, pg.URL)
	e.usersAdd(faultISV, "isv", faultISVPW)
	basic := remote.WithAuth(&authn.Basic{Username: faultISV, Password: faultISVPW})

	p := e.start()
	isvKey, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pemKey, _ := sign.MarshalPublicKey(isvKey.Public())
	if _, err := mustISVAPI(t, p.url).AddSigningKey(ctx, string(pemKey)); err != nil {
		t.Fatal(err)
	}
	platform, err := validation.LoadPlatformKeys(filepath.Join(e.dataDir, "platform-keys"))
	if err != nil {
		t.Fatal(err)
	}

	type published struct {
		repo    string
		ref     name.Digest // on the current process's host
		digest  string
		listing string
	}
	// publish pushes a signed image and creates a listing, without a version
	// yet (the version enqueues the job).
	publish := func(p *proc, repo, version string) published {
		t.Helper()
		l, err := mustISVAPI(t, p.url).CreateListing(ctx, registryapi.NewListing{Repository: faultISV + "/" + repo,
			ListingFields: registryapi.ListingFields{Name: new("fault " + repo)}})
		if err != nil {
			t.Fatal(err)
		}
		img := buildImage(t, version)
		tag, err := name.NewTag(p.host + "/" + faultISV + "/" + repo + ":" + version)
		if err != nil {
			t.Fatal(err)
		}
		if err := remote.Write(tag, img, basic, remote.WithContext(ctx)); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		ref := tag.Context().Digest(d.String())
		if err := sign.Sign(ctx, ref, isvKey, sign.WithRemoteOptions(basic, remote.WithContext(ctx))); err != nil {
			t.Fatal(err)
		}
		return published{repo: faultISV + "/" + repo, ref: ref, digest: d.String(), listing: l.ID}
	}
	addVersion := func(p *proc, pub published) {
		t.Helper()
		if _, err := mustISVAPI(t, p.url).AddVersion(ctx, pub.listing, registryapi.NewVersion{Version: "1.0.0", Digest: pub.digest}); err != nil {
			t.Fatal(err)
		}
	}
	on := func(p *proc, pub published) name.Digest {
		ref, err := name.NewDigest(p.host + "/" + pub.repo + "@" + pub.digest)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	// signatures returns the platform's countersignatures of the image and
	// the number of signatures (layers) of its .sig image.
	signatures := func(p *proc, pub published) (platformSigs, layers int) {
		t.Helper()
		ref := on(p, pub)
		opts := sign.WithRemoteOptions(basic, remote.WithContext(ctx))
		if sigs, err := sign.Verify(ctx, ref, []crypto.PublicKey{platform.Signing.Public()}, opts); err == nil {
			platformSigs = len(sigs)
		} else if !errors.Is(err, sign.ErrNoSignature) && !errors.Is(err, sign.ErrBadSignature) {
			t.Fatalf("verifying countersignatures: %v", err)
		}
		tag, err := sign.SignatureTag(ref)
		if err != nil {
			t.Fatal(err)
		}
		img, err := remote.Image(tag, basic, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("signature image: %v", err)
		}
		ls, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sign.Verify(ctx, ref, []crypto.PublicKey{isvKey.Public()}, opts); err != nil {
			t.Errorf("ISV signature: %v", err)
		}
		return platformSigs, len(ls)
	}
	// recover restarts the registry after a kill during job pub's run,
	// expires the dead process's lease and waits for the job to complete.
	recoverJob := func(pub published) (*proc, jobState) {
		t.Helper()
		j := readJob(t, ctx, pool, pub.repo, pub.digest)
		if j.State != "validating" || j.Attempts != 1 || j.LeaseOwner == nil {
			t.Fatalf("job after the kill: %+v, want validating, attempt 1, leased", j)
		}
		p := e.start()
		// The dead process's lease still holds: the job is not rerun yet.
		if j := readJob(t, ctx, pool, pub.repo, pub.digest); j.State != "validating" || j.Attempts != 1 {
			t.Fatalf("job right after the restart: %+v", j)
		}
		// The registry has no setting for the lease (validation.DefaultLease,
		// 5 minutes): let it expire now.
		if _, err := pool.Exec(ctx, `update validation_jobs set lease_until = now() - interval '1 second'
			where id = $1 and state = 'validating'`, j.ID); err != nil {
			t.Fatal(err)
		}
		poll(t, 3*time.Minute, "the job to complete after the restart", func() (bool, error) {
			j = readJob(t, ctx, pool, pub.repo, pub.digest)
			return j.State == "available" || j.State == "failed", nil
		})
		if j.State != "available" || j.Attempts != 2 || j.LeaseOwner != nil || j.Finished == nil || j.Reasons != "[]" {
			t.Errorf("job after recovery: %+v, want available after 2 attempts", j)
		}
		return p, j
	}

	// 1. Killed before the countersignature: the worker waits for the
	// ISV's signing keys, which the test holds locked.
	pubA := publish(p, "accel-a", "1.0.0")
	keys := lock(t, ctx, pg.URL, `lock table signing_keys in access exclusive mode`)
	addVersion(p, pubA)
	poll(t, 3*time.Minute, "job A to be validating and waiting for the signing keys", func() (bool, error) {
		if j := readJob(t, ctx, pool, pubA.repo, pubA.digest); j.State != "validating" {
			return false, nil
		}
		n, err := keys.blocked(ctx, pool)
		return n > 0, err
	})
	p.kill(t)
	keys.release(t, ctx, pool, true)
	p, jobA := recoverJob(pubA)
	if n, layers := signatures(p, pubA); n != 1 || layers != 2 {
		t.Errorf("image A: %d countersignatures and %d signatures, want 1 and 2 (ISV + platform)", n, layers)
	}

	// 2. Killed after the countersignature was pushed, before the job is
	// marked available: the test holds the job's row lock, so the worker's
	// completion waits.
	pubB := publish(p, "accel-b", "2.0.0")
	keys = lock(t, ctx, pg.URL, `lock table signing_keys in access exclusive mode`)
	addVersion(p, pubB)
	poll(t, 3*time.Minute, "job B to be validating and waiting for the signing keys", func() (bool, error) {
		if j := readJob(t, ctx, pool, pubB.repo, pubB.digest); j.State != "validating" {
			return false, nil
		}
		n, err := keys.blocked(ctx, pool)
		return n > 0, err
	})
	jb := readJob(t, ctx, pool, pubB.repo, pubB.digest)
	row := lock(t, ctx, pg.URL, `select 1 from validation_jobs where id = $1 for no key update`, jb.ID)
	keys.release(t, ctx, pool, false)
	poll(t, 3*time.Minute, "job B's completion to wait for the row lock", func() (bool, error) {
		n, err := row.blocked(ctx, pool)
		return n > 0, err
	})
	if n, layers := signatures(p, pubB); n != 1 || layers != 2 {
		t.Fatalf("image B before the kill: %d countersignatures, %d signatures; want 1 and 2", n, layers)
	}
	p.kill(t)
	row.release(t, ctx, pool, true)
	p, _ = recoverJob(pubB)
	if n, layers := signatures(p, pubB); n != 1 || layers != 2 {
		t.Errorf("image B: %d countersignatures and %d signatures, want 1 and 2 (ISV + platform)", n, layers)
	}

	// Each job completed once: job A did not run again meanwhile, each
	// version was created once, and the listings' versions show available.
	if j := readJob(t, ctx, pool, pubA.repo, pubA.digest); j.State != "available" || j.Attempts != jobA.Attempts ||
		j.Finished == nil || !j.Finished.Equal(*jobA.Finished) {
		t.Errorf("job A changed after its completion: %+v, was %+v", j, jobA)
	}
	for _, pub := range []published{pubA, pubB} {
		var n int
		if err := pool.QueryRow(ctx, `select count(*) from audit_log where action = 'listing.version.create' and target_id = $1`,
			pub.listing).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("listing %s: %d version audit entries, want 1", pub.listing, n)
		}
		vs, err := mustISVAPI(t, p.url).Versions(ctx, pub.listing, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(vs.Items) != 1 || vs.Items[0].State != "available" || vs.Items[0].Attempts != 2 {
			t.Errorf("listing %s versions: %+v", pub.listing, vs.Items)
		}
	}
	p.kill(t)
	e.checkNoRace()
}
