package loader_test

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	alidnnmodel "github.com/fpga-faas/faas/bitstreams/alidnn/model"
	blankmodel "github.com/fpga-faas/faas/bitstreams/blank/model"
	"github.com/fpga-faas/faas/bitstreams/images"
	loopbackmodel "github.com/fpga-faas/faas/bitstreams/loopback/model"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/identity"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/services/registry/auth"
	regserver "github.com/fpga-faas/faas/services/registry/server"
	"github.com/fpga-faas/faas/services/registry/validation"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

// registry is a running registry service (PostgreSQL and a directory
// store) with an ISV "acme", tenants "alice" and "bob", a node account and
// an admin.
type registry struct {
	t        testing.TB
	url      string
	host     string
	ln       net.Listener
	srv      *regserver.Server
	cancel   context.CancelFunc
	done     chan struct{}
	cfg      regserver.Config
	platform []crypto.PublicKey
	seal     *ecdh.PublicKey
	isvKey   *ecdsa.PrivateKey
	tokens   map[string]string // account → API token
	ids      map[string]string // account → id
	pg       *testenv.PG       // its database, to break
}

const password = "correct horse battery staple"

func startRegistry(t testing.TB) *registry {
	t.Helper()
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &registry{t: t, ln: ln, host: ln.Addr().String(), tokens: map[string]string{}, ids: map[string]string{}, pg: pg}
	r.url = "http://" + r.host
	r.cfg = regserver.Config{DatabaseURL: pg.URL, DataDir: filepath.Join(dir, "data"), KeyDir: filepath.Join(dir, "keys"),
		PlatformKeyDir: filepath.Join(dir, "platform"), Realm: r.url + "/auth/token",
		PasswordParams: auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}}
	r.start()
	t.Cleanup(r.stop)
	ctx := context.Background()
	for _, a := range []struct {
		name string
		role auth.Role
	}{{"acme", auth.RoleISV}, {"alice", auth.RoleTenant}, {"bob", auth.RoleTenant}, {"node1", auth.RoleNode}, {"admin", auth.RoleAdmin}} {
		acct, err := r.srv.CreateUser(ctx, a.name, a.role, password)
		if err != nil {
			t.Fatal(err)
		}
		r.ids[a.name] = acct.ID
		tok, err := r.as(a.name).CreateToken(ctx, registryapi.NewToken{Name: "test"})
		if err != nil {
			t.Fatalf("token of %s: %v", a.name, err)
		}
		r.tokens[a.name] = tok.Secret
	}
	pub, err := os.ReadFile(filepath.Join(r.cfg.PlatformKeyDir, validation.SigningPubFile))
	if err != nil {
		t.Fatal(err)
	}
	pk, err := sign.LoadPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	r.platform = []crypto.PublicKey{pk}
	sp, err := os.ReadFile(filepath.Join(r.cfg.PlatformKeyDir, validation.RecipientPubFile))
	if err != nil {
		t.Fatal(err)
	}
	if r.seal, err = seal.ParsePublicKeyPEM(sp); err != nil {
		t.Fatal(err)
	}
	r.isvKey = r.addKey()
	return r
}

// start opens the registry on its address (again, after stop).
func (r *registry) start() {
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := regserver.Open(ctx, r.cfg)
	if err != nil {
		r.t.Fatal(err)
	}
	if r.ln == nil {
		if r.ln, err = net.Listen("tcp", r.host); err != nil {
			r.t.Fatal(err)
		}
	}
	r.srv, r.cancel, r.done = srv, cancel, make(chan struct{})
	ln := r.ln
	go func() { defer close(r.done); srv.Serve(ctx, ln) }()
}

// stop shuts the registry down; its address refuses connections.
func (r *registry) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
	r.srv.Close()
	r.ln.Close()
	r.ln, r.cancel = nil, nil
}

// as is a client of the registry's API as account who, with the test
// password.
func (r *registry) as(who string) *registryclient.Client {
	r.t.Helper()
	c, err := registryclient.New(r.url, registryclient.WithBasicAuth(who, password))
	if err != nil {
		r.t.Fatal(err)
	}
	return c
}

// addKey registers a new signing key of the ISV.
func (r *registry) addKey() *ecdsa.PrivateKey {
	k, _ := r.addKeyID()
	return k
}

func (r *registry) addKeyID() (*ecdsa.PrivateKey, string) {
	k, err := sign.GenerateKey()
	if err != nil {
		r.t.Fatal(err)
	}
	pemBytes, _ := sign.MarshalPublicKey(k.Public())
	sk, err := r.as("acme").AddSigningKey(context.Background(), string(pemBytes))
	if err != nil {
		r.t.Fatal(err)
	}
	return k, sk.ID
}

// tamper flips a byte in the middle of a stored blob.
func (r *registry) tamper(digest string) {
	r.t.Helper()
	hex := strings.TrimPrefix(digest, "sha256:")
	found := false
	filepath.WalkDir(r.cfg.DataDir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == hex {
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 0x01
			os.WriteFile(p, b, 0o644)
			found = true
		}
		return nil
	})
	if !found {
		r.t.Fatalf("blob %s not in the store", digest)
	}
}

func (r *registry) isvAuth() remote.Option {
	return remote.WithAuth(&authn.Basic{Username: "acme", Password: password})
}

// published is an image in the registry.
type published struct {
	ref     string // host/acme/repo:tag
	digest  string
	listing string
	layers  []string // digests
}

// buildImage builds reference image source with frameBytes of frames per
// bitstream for part, sealed to the registry unless plain.
func (r *registry) buildImage(source string, frameBytes int, part shell.Part, plain bool) (v1.Image, []image.SealedLayer) {
	return r.buildImageYAML(source, frameBytes, part, plain, "")
}

// buildImageYAML is buildImage with extra lines appended to image.yaml, or
// replacing its description when extra is one.
func (r *registry) buildImageYAML(source string, frameBytes int, part shell.Part, plain bool, extra string) (v1.Image, []image.SealedLayer) {
	r.t.Helper()
	dir := r.t.TempDir()
	var src images.Source
	for _, s := range images.Sources {
		if s.Name == source {
			src = s
		}
	}
	for _, b := range src.Bitstreams {
		bit, err := b.Make(part, frameBytes)
		if err != nil {
			r.t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, b.File), bit, 0o644)
	}
	y, err := images.Manifest(source)
	if err != nil {
		r.t.Fatal(err)
	}
	if d, ok := strings.CutPrefix(extra, "description: "); ok {
		y = regexp.MustCompile(`(?m)^description: .*$`).ReplaceAll(y, []byte("description: "+strings.TrimSpace(d)))
	} else {
		y = append(y, extra...)
	}
	os.WriteFile(filepath.Join(dir, "image.yaml"), y, 0o644)
	m, err := image.Load(filepath.Join(dir, "image.yaml"))
	if err != nil {
		r.t.Fatal(err)
	}
	img, err := image.Build(context.Background(), m)
	if err != nil {
		r.t.Fatal(err)
	}
	if plain {
		return img, nil
	}
	sealed, keys, err := image.Seal(context.Background(), img, r.seal)
	if err != nil {
		r.t.Fatal(err)
	}
	return sealed, keys
}

// publish pushes img to acme/repo:tag, attaches its keys, signs it with
// key (nil: unsigned), lists it publicly and waits for validation to end
// in wantState.
func (r *registry) publish(repo, tag string, img v1.Image, keys []image.SealedLayer, key crypto.Signer, wantState string) published {
	r.t.Helper()
	ctx := context.Background()
	ref, err := name.NewTag(r.host+"/acme/"+repo+":"+tag, name.Insecure)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := remote.Write(ref, img, r.isvAuth()); err != nil {
		r.t.Fatal(err)
	}
	d, _ := img.Digest()
	if keys != nil {
		var lines []map[string]string
		for _, k := range keys {
			wk, _ := k.Key.MarshalBinary()
			lines = append(lines, map[string]string{"chip": k.Chip.String(), "layer": k.Layer.String(), "plaintext": k.Plaintext.String(),
				"key_id": k.KeyID.String(), "wrapped_key": base64.StdEncoding.EncodeToString(wk)})
		}
		kj, _ := json.Marshal(lines)
		desc, err := partial.Descriptor(img)
		if err != nil {
			r.t.Fatal(err)
		}
		if _, err := image.PushKeys(ctx, ref.Context(), *desc, kj, r.isvAuth()); err != nil {
			r.t.Fatal(err)
		}
	}
	dref := ref.Context().Digest(d.String())
	if key != nil {
		if err := sign.Sign(ctx, dref, key, sign.WithRemoteOptions(r.isvAuth())); err != nil {
			r.t.Fatal(err)
		}
	}
	isv := r.as("acme")
	l, err := isv.CreateListing(ctx, registryapi.NewListing{Repository: "acme/" + repo,
		ListingFields: registryapi.ListingFields{Name: new(repo + "-" + tag), Visibility: new("public")}})
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := isv.AddVersion(ctx, l.ID, registryapi.NewVersion{Version: tag, Digest: d.String()}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := isv.Publish(ctx, l.ID, true); err != nil {
		r.t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		vs, err := isv.Versions(ctx, l.ID, nil)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(vs.Items) == 1 && vs.Items[0].State != "pending" && vs.Items[0].State != "validating" {
			if vs.Items[0].State != wantState {
				r.t.Fatalf("validation of %s ended %s, want %s", ref, vs.Items[0].State, wantState)
			}
			break
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("validation of %s did not end", ref)
		}
		time.Sleep(100 * time.Millisecond)
	}
	p := published{ref: ref.String(), digest: d.String(), listing: l.ID}
	layers, err := img.Layers()
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ly := range layers {
		ld, err := ly.Digest()
		if err != nil {
			r.t.Fatal(err)
		}
		p.layers = append(p.layers, ld.String())
	}
	return p
}

func (r *registry) subscribe(tenant string, p published) {
	r.t.Helper()
	if _, err := r.as(tenant).Subscribe(context.Background(), p.listing); err != nil {
		r.t.Fatalf("%s subscribing to %s: %v", tenant, p.ref, err)
	}
}

// agent is the node agent's machinery over simulated boards, in process.
type agent struct {
	t      testing.TB
	reg    *registry
	dir    string
	sims   []*sim.Board
	boards []*device.Board
	client *regclient.Client
	node   identity.Node
	table  *slots.Table
	cache  *cache.Cache
	loader *loader.Loader
	// cacheMax is the cache's limit (cache.Options.MaxBytes).
	cacheMax int64
}

type agentOptions struct {
	boards     int
	model      shell.BoardModel
	shellMinor uint16
	cacheMax   int64
	transport  http.RoundTripper
	// unapproved registers the node without an enrollment token: no
	// operator has approved it.
	unapproved bool
}

func newAgent(t testing.TB, reg *registry, o agentOptions) *agent {
	t.Helper()
	if o.boards == 0 {
		o.boards = 1
	}
	if o.model.Name == "" {
		o.model = shell.ModelVU9PDual
	}
	roles, err := sim.NewRegistry(blankmodel.Model, loopbackmodel.Model, alidnnmodel.Model)
	if err != nil {
		t.Fatal(err)
	}
	a := &agent{t: t, reg: reg, dir: t.TempDir()}
	for i := range o.boards {
		b, err := sim.NewBoard(sim.Config{Model: o.model, Serial: fmt.Sprintf("T%03d", i), Roles: roles, ShellMinor: o.shellMinor, DDRSize: 1 << 30})
		if err != nil {
			t.Fatal(err)
		}
		db, err := devsim.Open(b)
		if err != nil {
			t.Fatal(err)
		}
		a.sims, a.boards = append(a.sims, b), append(a.boards, db)
	}
	t.Cleanup(func() {
		for _, b := range a.boards {
			b.Close()
		}
	})
	a.client, err = regclient.New(reg.url, "node1", reg.tokens["node1"], nil)
	if err != nil {
		t.Fatal(err)
	}
	// The node enrolls with a one-time token, as faasd does: the registry
	// releases keys to approved nodes only.
	if !o.unapproved {
		enrollment, err := reg.as("admin").CreateEnrollment(context.Background(), registryapi.NewEnrollment{})
		if err != nil {
			t.Fatal(err)
		}
		a.client.WithEnrollmentToken(enrollment.Token)
	}
	host := fmt.Sprintf("host-%d", time.Now().UnixNano())
	if a.node, err = identity.Load(context.Background(), a.dir, reg.url, host, a.client); err != nil {
		t.Fatal(err)
	}
	a.cacheMax = o.cacheMax
	a.restart(o.transport, nil)
	return a
}

// restart builds a fresh slot table, cache and loader over the same boards,
// state file and cache directory, and reconciles: what a restarted agent
// does. The cache is opened afresh, as by a new process: a download the
// dead agent left in progress is a leftover temporary file, not a download
// to wait for.
func (a *agent) restart(transport http.RoundTripper, checkpoint func(string)) []int {
	a.t.Helper()
	var err error
	if a.cache, err = cache.Open(filepath.Join(a.dir, "cache"), cache.Options{MaxBytes: a.cacheMax}); err != nil {
		a.t.Fatal(err)
	}
	if a.table, err = slots.Open(a.boards, filepath.Join(a.dir, "slots.json")); err != nil {
		a.t.Fatal(err)
	}
	wiped, err := a.table.Reconcile(context.Background(), a.cache.Has)
	if err != nil {
		a.t.Fatal(err)
	}
	a.loader, err = loader.New(loader.Config{Slots: a.table, Cache: a.cache, Registry: a.client, NodeID: a.node.ID,
		NodeKey: a.node.Key, PlatformKeys: a.reg.platform, Transport: transport, Checkpoint: checkpoint})
	if err != nil {
		a.t.Fatal(err)
	}
	return wiped
}

func (a *agent) tenant(name string) loader.Tenant {
	return loader.Tenant{Name: name, ID: a.reg.ids[name], Token: a.reg.tokens[name]}
}

var opSeq int

func (a *agent) load(tenant, ref string, slot *int) (loader.Result, error) {
	opSeq++
	return a.loader.Load(context.Background(), loader.Request{ID: fmt.Sprintf("op%d", opSeq), Image: ref, Slot: slot, Tenant: a.tenant(tenant)})
}

func intp(i int) *int { return &i }

// state is what can be observed of every slot: its record and its chip.
type slotState struct {
	State  string
	Digest string // recorded
	Tenant string
	Chip   [32]byte // digest register
	RoleID uint32
}

func (a *agent) states() []slotState {
	a.t.Helper()
	var out []slotState
	for i := range a.table.Len() {
		sl, _ := a.table.Slot(i)
		rec := a.table.Record(i)
		s := slotState{State: string(rec.State), Tenant: rec.Tenant}
		if rec.Image != nil {
			s.Digest = rec.Image.Digest
		}
		s.Chip, _ = sl.Chip.ImageDigest()
		role, _ := sl.Chip.Role()
		s.RoleID = role.ID
		out = append(out, s)
	}
	return out
}

func hostOf(ref string) string { return strings.SplitN(ref, "/", 2)[0] }
