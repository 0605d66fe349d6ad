package main

// The replica kill test, which holds that registry replicas keep no state of
// their own: three `registry serve` processes on one PostgreSQL and one
// MinIO bucket behind a round-robin proxy; crane and oras push and pull
// through it while one replica is SIGKILLed and restarted, and the JWT keys
// are rotated meanwhile.

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/validation"
)

// findTool finds a client binary on PATH or in $(go env GOPATH)/bin; a
// missing one skips the test, or fails it when CI is true.
func findTool(t *testing.T, tool string) string {
	t.Helper()
	if p, err := exec.LookPath(tool); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			if p := filepath.Join(dir, "bin", tool); fileExists(p) {
				return p
			}
		}
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found (see services/registry/server/clients_test.go for how to install it)", tool)
	}
	t.Skipf("%s not found", tool)
	return ""
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// clients runs crane and oras with a configuration of their own.
type clients struct {
	crane, oras string
	env         []string
	dir         string
	retries     atomic.Int64
}

// run runs a client command, retrying it (at most twice) when it fails:
// a request of it may have been in flight on the killed replica. The
// balancer's log tells whether any failure came from elsewhere.
func (c *clients) run(ctx context.Context, bin string, args ...string) (string, error) {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			c.retries.Add(1)
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env, cmd.Dir = c.env, c.dir
		var out, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err = cmd.Run(); err == nil {
			return out.String(), nil
		}
		err = fmt.Errorf("%s %s: %w\n%s", filepath.Base(bin), strings.Join(args, " "), err, stderr.String())
	}
	return "", err
}

// pushed is one image pushed through the balancer.
type pushed struct {
	repo, tag, digest string
	blobs             map[string][]byte // digest → content of every layer/file
	fpga              bool              // a loopback FPGA image: signed, listed, validated
	listing           string
	file              string // of an oras artifact
}

var orasDigestRE = regexp.MustCompile(`Digest: (sha256:[a-f0-9]{64})`)

func TestReplicasKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cl := &clients{crane: findTool(t, "crane"), oras: findTool(t, "oras"), dir: t.TempDir()}
	cl.env = []string{"HOME=" + cl.dir, "DOCKER_CONFIG=" + filepath.Join(cl.dir, "docker"), "PATH=" + os.Getenv("PATH")}
	pg := testenv.Postgres(t)
	s3 := testenv.MinIO(t)
	e := newRegistryEnv(t, pg.URL, t.TempDir(),
		"FAAS_S3_ENDPOINT="+s3.Endpoint, "FAAS_S3_ACCESS_KEY="+s3.AccessKey,
		"FAAS_S3_SECRET_KEY="+s3.SecretKey, "FAAS_S3_BUCKET=replicas")
	// Short lease and key timings so that the test sees a takeover and a
	// key rotation within its run.
	e.serveArgs = []string{"--validation-lease", "3s", "--key-reload-interval", "500ms", "--key-publish-delay", "3s",
		"--gc-interval", "-1s"}
	pool := dbPool(t, pg.URL)
	e.usersAdd(faultISV, "isv", faultISVPW)

	// The first replica creates the keys (JWT and platform) in the shared
	// data directory; the others load them.
	procs := []*proc{e.start()}
	procs = append(procs, e.start(), e.start())
	lb := newBalancer(t, procs[0].url, procs[1].url, procs[2].url)
	host := lb.host()
	base := "http://" + host

	if _, err := cl.run(ctx, cl.crane, "auth", "login", host, "-u", faultISV, "-p", faultISVPW); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.run(ctx, cl.oras, "login", "--plain-http", "-u", faultISV, "-p", faultISVPW, host); err != nil {
		t.Fatal(err)
	}
	isvKey, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pemKey, _ := sign.MarshalPublicKey(isvKey.Public())
	if _, err := mustISVAPI(t, base).AddSigningKey(ctx, string(pemKey)); err != nil {
		t.Fatal(err)
	}
	basic := remote.WithAuth(&authn.Basic{Username: faultISV, Password: faultISVPW})

	// The images: loopback FPGA images pushed by crane from OCI layouts,
	// then signed and published (validation), and oras artifacts of
	// random files.
	const nFPGA, nOras = 3, 4
	var images []*pushed
	for i := range nFPGA {
		img := buildImage(t, fmt.Sprintf("1.0.%d", i))
		dir := filepath.Join(cl.dir, fmt.Sprintf("layout%d", i))
		lp, err := layout.Write(dir, empty.Index)
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendImage(img); err != nil {
			t.Fatal(err)
		}
		d, _ := img.Digest()
		p := &pushed{repo: fmt.Sprintf("%s/fpga%d", faultISV, i), tag: "v1", digest: d.String(), fpga: true, blobs: map[string][]byte{}}
		layers, _ := img.Layers()
		for _, l := range layers {
			ld, _ := l.Digest()
			rc, _ := l.Compressed()
			b, err := readAllClose(rc)
			if err != nil {
				t.Fatal(err)
			}
			p.blobs[ld.String()] = b
		}
		images = append(images, p)
	}
	for i := range nOras {
		data, d := randomBlob(uint64(100+i), 3<<20+i)
		file := fmt.Sprintf("payload%d.bin", i)
		if err := os.WriteFile(filepath.Join(cl.dir, file), data, 0o644); err != nil {
			t.Fatal(err)
		}
		images = append(images, &pushed{repo: fmt.Sprintf("%s/art%d", faultISV, i), tag: "v1", blobs: map[string][]byte{d: data}, file: file})
	}

	// pushAll pushes (and for FPGA images signs and publishes) every image
	// concurrently; errors are collected.
	pushAll := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, len(images))
		for i, p := range images {
			wg.Go(func() {
				ref := host + "/" + p.repo + ":" + p.tag
				if p.fpga {
					if _, err := cl.run(ctx, cl.crane, "push", "--insecure", filepath.Join(cl.dir, fmt.Sprintf("layout%d", i)), ref); err != nil {
						errs[i] = err
						return
					}
					errs[i] = publish(ctx, host, base, p, isvKey, basic)
					return
				}
				out, err := cl.run(ctx, cl.oras, "push", "--plain-http", "--artifact-type", "application/vnd.faas.test", ref, p.file+":application/octet-stream")
				if err != nil {
					errs[i] = err
					return
				}
				m := orasDigestRE.FindStringSubmatch(out)
				if m == nil {
					errs[i] = fmt.Errorf("oras push printed no digest: %s", out)
					return
				}
				p.digest = m[1]
			})
		}
		wg.Wait()
		return errs
	}

	// killDuring runs work while replica victim is SIGKILLed (once the
	// balancer has served `after` more requests) and restarted.
	killed := 0
	killDuring := func(victim, after int, work func() []error) []error {
		t.Helper()
		start := lb.count()
		done := make(chan []error, 1)
		go func() { done <- work() }()
		poll(t, opTimeout, "requests before the kill", func() (bool, error) {
			select {
			case errs := <-done:
				done <- errs
				return true, nil
			default:
			}
			return lb.count() >= start+after, nil
		})
		killed += lb.takeOut(victim)
		procs[victim].kill(t)
		procs[victim] = e.start()
		lb.putBack(t, victim, procs[victim].url)
		return <-done
	}

	// Rotate the JWT keys while the pushes run: tokens signed by one
	// replica with the new key must be accepted by the others.
	rotate := exec.CommandContext(ctx, os.Args[0], "keys", "rotate", "--key-dir", filepath.Join(e.dataDir, "keys"))
	rotate.Env = e.env
	if out, err := rotate.CombinedOutput(); err != nil {
		t.Fatalf("keys rotate: %v\n%s", err, out)
	}
	for i, err := range killDuring(1, 40, pushAll) {
		if err != nil {
			t.Errorf("push of %s: %v", images[i].repo, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// Pull everything back, byte for byte, while replica 2 is killed.
	pullAll := func() []error {
		var wg sync.WaitGroup
		errs := make([]error, len(images))
		for i, p := range images {
			wg.Go(func() { errs[i] = pullCheck(ctx, cl, host, p, i) })
		}
		wg.Wait()
		return errs
	}
	for i, err := range killDuring(2, 20, pullAll) {
		if err != nil {
			t.Errorf("pull of %s: %v", images[i].repo, err)
		}
	}

	// The balancer's log: every request not in flight on a killed replica
	// got an answer below 500, whole.
	reqs := lb.requests()
	perBackend := map[string]int{}
	failedElsewhere, clientGone := 0, 0
	for _, r := range reqs {
		perBackend[fmt.Sprintf("%d/%d", r.Backend, r.Gen)]++
		if r.OnKilled {
			continue
		}
		if r.ClientGone {
			clientGone++
			continue
		}
		if r.Status >= 500 || r.Err != "" {
			failedElsewhere++
			t.Errorf("%s %s on replica %d (incarnation %d): %d %s", r.Method, r.Path, r.Backend, r.Gen, r.Status, r.Err)
		}
	}
	onKilledFailed := 0
	for _, r := range reqs {
		if r.OnKilled && (r.Status >= 500 || r.Err != "" || r.Status == 0) {
			onKilledFailed++
		}
	}
	t.Logf("requests: %d; per replica/incarnation %v; in flight on a killed replica: %d (%d of them failed); cancelled by their client: %d; failed elsewhere: %d; client retries: %d",
		len(reqs), perBackend, killed, onKilledFailed, clientGone, failedElsewhere, cl.retries.Load())
	if retries := int(cl.retries.Load()); retries > onKilledFailed {
		t.Errorf("%d client retries for %d failed requests on killed replicas", retries, onKilledFailed)
	}

	// Validation ran once per FPGA image: one job, available, one
	// countersignature by the platform, one version created.
	platform, err := validation.LoadPlatformKeys(filepath.Join(e.dataDir, "platform-keys"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range images {
		if !p.fpga {
			continue
		}
		var j jobState
		poll(t, 3*time.Minute, "validation of "+p.repo, func() (bool, error) {
			j = readJob(t, ctx, pool, p.repo, p.digest)
			return j.State == "available" || j.State == "failed", nil
		})
		var jobs int
		if err := pool.QueryRow(ctx, `select count(*) from validation_jobs j join repositories r on r.id = j.repository_id
			where r.name = $1`, p.repo).Scan(&jobs); err != nil {
			t.Fatal(err)
		}
		if j.State != "available" || jobs != 1 || j.Reasons != "[]" {
			t.Errorf("%s: %d jobs, %+v; want one, available", p.repo, jobs, j)
		}
		ref, _ := name.NewDigest(host + "/" + p.repo + "@" + p.digest)
		sigs, err := sign.Verify(ctx, ref, []crypto.PublicKey{platform.Signing.Public()}, sign.WithRemoteOptions(basic, remote.WithContext(ctx)))
		if err != nil || len(sigs) != 1 {
			t.Errorf("%s: %d platform countersignatures (%v), want 1", p.repo, len(sigs), err)
		}
		var versions int
		if err := pool.QueryRow(ctx, `select count(*) from audit_log where action = 'listing.version.create' and target_id = $1`,
			p.listing).Scan(&versions); err != nil {
			t.Fatal(err)
		}
		if versions != 1 {
			t.Errorf("%s: %d versions created, want 1", p.repo, versions)
		}
		t.Logf("%s: validation %s after %d attempt(s)", p.repo, j.State, j.Attempts)
	}
	// Nothing lost or duplicated: each repository holds exactly its
	// manifests and tags.
	for _, p := range images {
		wantManifests := 1
		if p.fpga {
			// The image and its .sig image twice: with the ISV's
			// signature, then with the platform's added (validated).
			wantManifests = 3
		}
		var manifests, tags int
		var tagged string
		if err := pool.QueryRow(ctx, `select (select count(*) from manifests m where m.repository_id = r.id),
			(select count(*) from tags g where g.repository_id = r.id),
			coalesce((select manifest_digest from tags g where g.repository_id = r.id and g.name = $2), '')
			from repositories r where r.name = $1`, p.repo, p.tag).Scan(&manifests, &tags, &tagged); err != nil {
			t.Fatalf("%s: %v", p.repo, err)
		}
		wantTags := 1
		if p.fpga {
			wantTags = 2 // v1 and the .sig tag
		}
		if manifests != wantManifests || tags != wantTags || tagged != p.digest {
			t.Errorf("%s: %d manifests, %d tags, %s → %s; want %d, %d, %s", p.repo, manifests, tags, p.tag, tagged,
				wantManifests, wantTags, p.digest)
		}
	}

	e.checkNoRace()
}

// publish signs an FPGA image pushed to p (as its ISV) and lists it with a
// version, which enqueues its validation. Idempotent, so that a retry
// after a killed request is harmless.
func publish(ctx context.Context, host, base string, p *pushed, key crypto.Signer, basic remote.Option) error {
	ref, err := name.NewDigest(host + "/" + p.repo + "@" + p.digest)
	if err != nil {
		return err
	}
	ropts := sign.WithRemoteOptions(basic, remote.WithContext(ctx))
	var lastErr error
	for range 3 {
		if lastErr = sign.Sign(ctx, ref, key, ropts); lastErr == nil {
			break
		}
	}
	if lastErr != nil {
		return fmt.Errorf("sign: %w", lastErr)
	}
	isv, err := isvAPI(base)
	if err != nil {
		return err
	}
	var l registryapi.Listing
	if err := retry502(func() (err error) {
		l, err = isv.CreateListing(ctx, registryapi.NewListing{Repository: p.repo,
			ListingFields: registryapi.ListingFields{Name: new("replica " + p.repo)}})
		return err
	}); err != nil {
		return err
	}
	p.listing = l.ID
	return retry502(func() error {
		_, err := isv.AddVersion(ctx, l.ID, registryapi.NewVersion{Version: "1.0.0", Digest: p.digest})
		return err
	})
}

// retry502 calls call again (twice at most) when it failed on a killed
// replica (502 from the balancer); a retry of a request the registry did
// complete would fail on its conflict, and so the test.
func retry502(call func() error) error {
	var err error
	for range 3 {
		var e *registryclient.Error
		if err = call(); !errors.As(err, &e) || e.Status != http.StatusBadGateway {
			return err
		}
	}
	return err
}

// pullCheck pulls p back with its client and compares every byte by digest.
func pullCheck(ctx context.Context, cl *clients, host string, p *pushed, i int) error {
	ref := host + "/" + p.repo + ":" + p.tag
	if p.fpga {
		m, err := cl.run(ctx, cl.crane, "manifest", "--insecure", ref)
		if err != nil {
			return err
		}
		if got := sha256Digest([]byte(m)); got != p.digest {
			return fmt.Errorf("manifest of %s: digest %s, want %s", ref, got, p.digest)
		}
		for d, want := range p.blobs {
			b, err := cl.run(ctx, cl.crane, "blob", "--insecure", host+"/"+p.repo+"@"+d)
			if err != nil {
				return err
			}
			if b != string(want) {
				return fmt.Errorf("blob %s of %s: %d bytes differ from the %d pushed", d, ref, len(b), len(want))
			}
		}
		return nil
	}
	out := filepath.Join(cl.dir, fmt.Sprintf("pulled%d", i))
	if _, err := cl.run(ctx, cl.oras, "pull", "--plain-http", "-o", out, ref); err != nil {
		return err
	}
	m, err := cl.run(ctx, cl.oras, "manifest", "fetch", "--plain-http", ref)
	if err != nil {
		return err
	}
	if got := sha256Digest([]byte(m)); got != p.digest {
		return fmt.Errorf("manifest of %s: digest %s, want %s", ref, got, p.digest)
	}
	for _, want := range p.blobs {
		got, err := os.ReadFile(filepath.Join(out, p.file))
		if err != nil {
			return err
		}
		if string(got) != string(want) {
			return fmt.Errorf("%s: pulled file differs from the pushed one", ref)
		}
	}
	return nil
}

func sha256Digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func readAllClose(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}

// TestReplicasChunkedUpload: a chunked upload started on one replica
// continues on the others, chunk by chunk, and is committed on a third;
// the upload's state is the database's and the bucket's, none in a
// process (the digest is computed over the staged bytes at commit).
func TestReplicasChunkedUpload(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s3 := testenv.MinIO(t)
	e := newRegistryEnv(t, testenv.Postgres(t).URL, t.TempDir(),
		"FAAS_S3_ENDPOINT="+s3.Endpoint, "FAAS_S3_ACCESS_KEY="+s3.AccessKey,
		"FAAS_S3_SECRET_KEY="+s3.SecretKey, "FAAS_S3_BUCKET=replicas")
	e.usersAdd(faultISV, "isv", faultISVPW)
	procs := []*proc{e.start()}
	procs = append(procs, e.start(), e.start())
	const repo = faultISV + "/chunks"
	// One token, issued by replica 0, for every replica.
	u := newUploader(t, ctx, procs[0], repo)
	data, digest := randomBlob(7, 5*chunkSize+4321)
	loc := u.begin()
	off := 0
	for i := 0; len(data)-off > chunkSize; i++ {
		u.base = procs[(i+1)%3].url
		if got := u.status(loc); got != off {
			t.Fatalf("status on replica %d: offset %d, want %d", (i+1)%3, got, off)
		}
		u.patch(loc, off, data[off:off+chunkSize])
		off += chunkSize
	}
	u.base = procs[2].url
	u.put(loc, off, data[off:], digest)
	for _, p := range procs {
		u.base = p.url
		u.checkBlob(digest, data)
	}
	e.checkNoRace()
}
