package validation_test

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell"
)

type env struct {
	pool  *pgxpool.Pool
	meta  *meta.Store
	blobs *dirstore.Store
	host  string
	keys  validation.PlatformKeys
	isvID string
	isv   *ecdsa.PrivateKey
}

func setup(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	pool := testenv.RegistryDB(t)
	st, err := dirstore.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{pool: pool, meta: meta.New(pool), blobs: st}
	h, err := distribution.New(distribution.Config{Meta: e.meta, Blobs: st, Authorizer: distribution.AllowAll{}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	e.host = strings.TrimPrefix(srv.URL, "http://")
	keyDir := filepath.Join(t.TempDir(), "platform")
	if e.keys, err = validation.LoadPlatformKeys(keyDir); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(keyDir, validation.SigningKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("signing key file: %v %v", fi, err)
	}
	again, err := validation.LoadPlatformKeys(keyDir)
	if err != nil || !again.Signing.Equal(e.keys.Signing) || !again.Recipient.Equal(e.keys.Recipient) {
		t.Fatalf("reloading platform keys: %v", err)
	}
	if err := pool.QueryRow(ctx, `insert into accounts (name, role) values ('isv1', 'isv') returning id::text`).Scan(&e.isvID); err != nil {
		t.Fatal(err)
	}
	if e.isv, err = sign.GenerateKey(); err != nil {
		t.Fatal(err)
	}
	e.registerKey(t, e.isv)
	return e
}

func (e *env) registerKey(t *testing.T, k *ecdsa.PrivateKey) {
	t.Helper()
	pem, _ := sign.MarshalPublicKey(k.Public())
	fp, _ := sign.Fingerprint(k.Public())
	if _, err := e.pool.Exec(context.Background(), `insert into signing_keys (account_id, key_id, algorithm, public_key)
		values ($1, $2, 'ecdsa-p256', $3)`, e.isvID, fp, string(pem)); err != nil {
		t.Fatal(err)
	}
}

func (e *env) worker(t *testing.T, owner string, lease time.Duration) *validation.Worker {
	t.Helper()
	w, err := validation.New(validation.Config{Pool: e.pool, Meta: e.meta, Blobs: e.blobs, Signer: e.keys.Signing,
		Owner: owner, Lease: lease, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// buildImage builds a two-chip loopback image; corrupt flips a byte in the
// configuration stream of chip 1; recipient seals it.
func buildImage(t *testing.T, corrupt bool, recipient *ecdh.PublicKey) (v1.Image, []image.SealedLayer) {
	t.Helper()
	dir := t.TempDir()
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "name: loopback2\nversion: 1.0.0\nvendor: Test\nboard: faas-vu9p-dual\nboth_chips: true\nchips:\n")
	for i := range 2 {
		bit, err := loopback.Bitstream(shell.PartVU9P, (64+i)<<10)
		if err != nil {
			t.Fatal(err)
		}
		if corrupt && i == 1 {
			bit[len(bit)/2] ^= 0x40
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
	if recipient == nil {
		return img, nil
	}
	img, keys, err := image.Seal(t.Context(), img, recipient)
	if err != nil {
		t.Fatal(err)
	}
	return img, keys
}

// push pushes img to isv1/<repo>:1.0.0, signs it with key (nil: unsigned)
// and enqueues its validation job, as POST /listings/{id}/versions does.
func (e *env) push(t *testing.T, repo string, img v1.Image, key crypto.Signer) name.Digest {
	t.Helper()
	ctx := t.Context()
	tag, err := name.NewTag(e.host + "/isv1/" + repo + ":1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	ref := tag.Context().Digest(d.String())
	if key != nil {
		if err := sign.Sign(ctx, ref, key); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.pool.Exec(ctx, `insert into validation_jobs (repository_id, manifest_digest)
		select id, $2 from repositories where name = $1`, "isv1/"+repo, d.String()); err != nil {
		t.Fatal(err)
	}
	return ref
}

type jobRow struct {
	State    string
	Attempts int
	Reasons  []validation.Reason
	Parts    []string
	Indexes  []int
}

func (e *env) job(t *testing.T, ref name.Digest) jobRow {
	t.Helper()
	var r jobRow
	var reasons []byte
	if err := e.pool.QueryRow(context.Background(), `select j.state, j.attempts, j.reasons, j.parts, j.chip_indexes from validation_jobs j
		join repositories r on r.id = j.repository_id where r.name = $1 and j.manifest_digest = $2`,
		ref.Context().RepositoryStr(), ref.DigestStr()).Scan(&r.State, &r.Attempts, &reasons, &r.Parts, &r.Indexes); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(reasons, &r.Reasons); err != nil {
		t.Fatal(err)
	}
	return r
}

// drain runs jobs until none is runnable.
func drain(t *testing.T, w *validation.Worker) {
	t.Helper()
	for {
		ran, err := w.RunOnce(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if !ran {
			return
		}
	}
}

// countersignatures counts the signatures of ref by the platform key.
func (e *env) countersignatures(t *testing.T, ref name.Digest) int {
	t.Helper()
	sigs, err := sign.Verify(t.Context(), ref, []crypto.PublicKey{e.keys.Signing.Public()})
	if err != nil {
		return 0
	}
	return len(sigs)
}

func hasCode(rs []validation.Reason, code string) bool {
	for _, r := range rs {
		if string(r.Code) == code {
			return true
		}
	}
	return false
}

func TestPipeline(t *testing.T) {
	e := setup(t)
	w := e.worker(t, "w1", time.Minute)

	good, _ := buildImage(t, false, e.keys.Recipient.PublicKey())
	okRef := e.push(t, "good", good, e.isv)

	unsignedRef := e.push(t, "unsigned", good, nil)

	stranger, _ := sign.GenerateKey()
	wrongRef := e.push(t, "wrongkey", good, stranger)

	bad, _ := buildImage(t, true, nil)
	badRef := e.push(t, "invalid", bad, e.isv)

	drain(t, w)

	if j := e.job(t, okRef); j.State != "available" || j.Attempts != 1 || len(j.Reasons) != 0 {
		t.Errorf("good image: %+v", j)
	}
	// The parts its chips need are kept for the pool's placement.
	if j := e.job(t, okRef); !slices.Equal(j.Parts, []string{shell.PartVU9P.Name, shell.PartVU9P.Name}) || !slices.Equal(j.Indexes, []int{0, 1}) {
		t.Errorf("good image's parts: %q, chips %v", j.Parts, j.Indexes)
	}
	if n := e.countersignatures(t, okRef); n != 1 {
		t.Errorf("good image: %d countersignatures, want 1", n)
	}
	if _, err := sign.Verify(t.Context(), okRef, []crypto.PublicKey{e.isv.Public()}); err != nil {
		t.Errorf("ISV signature lost after countersigning: %v", err)
	}
	for _, c := range []struct {
		what string
		ref  name.Digest
		code string
	}{
		{"unsigned", unsignedRef, string(validation.CodeSignature)},
		{"wrong key", wrongRef, string(validation.CodeSignature)},
	} {
		j := e.job(t, c.ref)
		if j.State != "failed" || !hasCode(j.Reasons, c.code) || !strings.Contains(j.Reasons[0].Message, "no valid ISV signature") {
			t.Errorf("%s: %+v", c.what, j)
		}
		if n := e.countersignatures(t, c.ref); n != 0 {
			t.Errorf("%s: countersigned", c.what)
		}
	}
	j := e.job(t, badRef)
	if j.State != "failed" || len(j.Reasons) == 0 || hasCode(j.Reasons, string(validation.CodeSignature)) || len(j.Parts) != 0 {
		t.Errorf("invalid image: %+v", j)
	}
	t.Logf("invalid image reasons: %+v", j.Reasons)
	// Each outcome is the ISV's validation.finished event, written with it.
	var available, failed int
	if err := e.pool.QueryRow(t.Context(), `select count(*) filter (where data->>'state' = 'available'),
		count(*) filter (where data->>'state' = 'failed') from events
		where account_id = $1::uuid and type = 'validation.finished'`, e.isvID).Scan(&available, &failed); err != nil {
		t.Fatal(err)
	}
	if available != 1 || failed != 3 {
		t.Errorf("validation.finished events: %d available, %d failed; want 1 and 3", available, failed)
	}
	if n := e.countersignatures(t, badRef); n != 0 {
		t.Errorf("invalid image countersigned")
	}
}

func TestRevokedKey(t *testing.T) {
	e := setup(t)
	img, _ := buildImage(t, false, nil)
	ref := e.push(t, "revoked", img, e.isv)
	if _, err := e.pool.Exec(t.Context(), `update signing_keys set revoked_at = now()`); err != nil {
		t.Fatal(err)
	}
	drain(t, e.worker(t, "w1", time.Minute))
	if j := e.job(t, ref); j.State != "failed" || !hasCode(j.Reasons, string(validation.CodeSignature)) {
		t.Errorf("revoked key: %+v", j)
	}
	if e.countersignatures(t, ref) != 0 {
		t.Error("countersigned with a revoked ISV key")
	}
}

// TestCrashedWorker: worker A claims the job and dies; once its lease has
// expired worker B takes the job over and completes it, once; A's late
// completion is refused.
func TestCrashedWorker(t *testing.T) {
	e := setup(t)
	img, _ := buildImage(t, false, nil)
	ref := e.push(t, "crash", img, e.isv)

	a := e.worker(t, "A", 300*time.Millisecond)
	b := e.worker(t, "B", time.Minute)
	job, err := a.Claim(t.Context())
	if err != nil || job == nil {
		t.Fatalf("A claims: %v %v", job, err)
	}
	// The lease holds: B finds nothing to do.
	if ran, err := b.RunOnce(t.Context()); err != nil || ran {
		t.Fatalf("B ran a leased job: %v %v", ran, err)
	}
	time.Sleep(500 * time.Millisecond) // A is "killed": its lease expires
	if ran, err := b.RunOnce(t.Context()); err != nil || !ran {
		t.Fatalf("B after the lease expired: %v %v", ran, err)
	}
	if ran, err := b.RunOnce(t.Context()); err != nil || ran {
		t.Fatalf("B ran the job twice: %v %v", ran, err)
	}
	j := e.job(t, ref)
	if j.State != "available" || j.Attempts != 2 {
		t.Errorf("job after takeover: %+v", j)
	}
	if n := e.countersignatures(t, ref); n != 1 {
		t.Errorf("%d countersignatures, want 1", n)
	}
	// A comes back from the dead: its work is refused, nothing changes.
	if err := a.Process(t.Context(), job); err == nil || !strings.Contains(err.Error(), "lease lost") {
		t.Errorf("A's late completion: %v", err)
	}
	if n := e.countersignatures(t, ref); n != 1 {
		t.Errorf("after A's rerun: %d countersignatures, want 1", n)
	}
	if j := e.job(t, ref); j.State != "available" || j.Attempts != 2 {
		t.Errorf("job after A's rerun: %+v", j)
	}
	// Nor does the ISV hear of it twice.
	var events int
	if err := e.pool.QueryRow(t.Context(), `select count(*) from events where type = 'validation.finished'`).Scan(&events); err != nil || events != 1 {
		t.Errorf("%d validation.finished events (%v), want 1", events, err)
	}
}

// slowBlobs is a blob store whose reads take a while, as on a loaded
// machine.
type slowBlobs struct {
	blob.Store
	delay time.Duration
}

func (s slowBlobs) Open(ctx context.Context, d blob.Digest, offset, length int64) (io.ReadCloser, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Open(ctx, d, offset, length)
}

// TestSlowJobKeepsItsLease: a job that outlasts its lease is not taken over
// while its worker is alive and renewing; it runs once.
func TestSlowJobKeepsItsLease(t *testing.T) {
	e := setup(t)
	img, _ := buildImage(t, false, nil)
	ref := e.push(t, "slow", img, e.isv)
	a, err := validation.New(validation.Config{Pool: e.pool, Meta: e.meta, Blobs: slowBlobs{e.blobs, 150 * time.Millisecond},
		Signer: e.keys.Signing, Owner: "A", Lease: 300 * time.Millisecond, Poll: 10 * time.Millisecond, Backoff: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := e.worker(t, "B", time.Minute)
	job, err := a.Claim(t.Context())
	if err != nil || job == nil {
		t.Fatalf("A claims: %v %v", job, err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Process(t.Context(), job) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			j := e.job(t, ref)
			if j.State != "available" || j.Attempts != 1 {
				t.Errorf("job: %+v, want available after 1 attempt", j)
			}
			if n := e.countersignatures(t, ref); n != 1 {
				t.Errorf("%d countersignatures, want 1", n)
			}
			return
		default:
		}
		if ran, err := b.RunOnce(t.Context()); err != nil || ran {
			t.Fatalf("B took over A's running job: ran %v, %v", ran, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
