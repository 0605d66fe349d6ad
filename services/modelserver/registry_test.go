package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/modelartifact"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
	regserver "github.com/fpga-faas/faas/services/registry/server"
)

// testRegistry is our registry, run in the test on a database of its own,
// with the ISV account acme and an API token of it.
type testRegistry struct {
	host  string // 127.0.0.1:port
	user  string
	token string
	stop  func()
}

func startRegistry(t *testing.T) *testRegistry {
	t.Helper()
	pg := testenv.Postgres(t)
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	cfg := regserver.Config{DatabaseURL: pg.URL, DataDir: filepath.Join(dir, "data"), KeyDir: filepath.Join(dir, "keys"),
		PlatformKeyDir: filepath.Join(dir, "platform"), Realm: url + "/auth/token",
		PasswordParams: auth.Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := regserver.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	stopped := false
	r := &testRegistry{host: ln.Addr().String(), user: "acme"}
	r.stop = func() {
		if !stopped {
			stopped = true
			cancel()
			<-done
			srv.Close()
			ln.Close()
		}
	}
	t.Cleanup(r.stop)
	const password = "correct horse battery staple"
	if _, err := srv.CreateUser(ctx, r.user, auth.RoleISV, password); err != nil {
		t.Fatal(err)
	}
	c, err := registryclient.New(url, registryclient.WithBasicAuth(r.user, password))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.CreateToken(ctx, registryapi.NewToken{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	r.token = tok.Secret
	return r
}

func (r *testRegistry) remote() modelartifact.Remote {
	return modelartifact.Remote{User: r.user, Token: r.token}
}

// toolPath finds a client the tests drive (crane, oras, grpcurl) on PATH
// or in $(go env GOPATH)/bin, where `make tools` puts them; without it the
// test is skipped, or fails when CI is true.
func toolPath(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found (CI=true: a missing client is a failure); install it with: make tools", name)
	}
	t.Skipf("%s not found; install it with: make tools (with CI=true this is a failure)", name)
	return ""
}

// buildFaas builds the faas command into a temporary folder.
func buildFaas(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "faas")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/fpga-faas/faas/sdk/cmd/faas").CombinedOutput()
	if err != nil {
		t.Fatalf("go build faas: %v\n%s", err, out)
	}
	return bin
}

// dockerConfig writes a Docker config.json holding r's credentials, which
// crane and oras read through $DOCKER_CONFIG.
func dockerConfig(t *testing.T, r *testRegistry) string {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(map[string]any{"auths": map[string]any{r.host: map[string]string{"username": r.user, "password": r.token}}})
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFaasModelPush pushes MNIST with faas model push to a registry
// started here, reads the manifest back with crane and oras, and serves
// the artifact pulled by tag, pinned to the digest push printed.
func TestFaasModelPush(t *testing.T) {
	crane := toolPath(t, "crane")
	oras := toolPath(t, "oras")
	r := startRegistry(t)
	faas := buildFaas(t)
	dir := t.TempDir()
	login, _ := json.Marshal(map[string]string{"registry": "http://" + r.host, "user": r.user, "token": r.token})
	cfgPath := filepath.Join(dir, "config.json")
	for name, b := range map[string][]byte{"login.json": login, "config.json": []byte(mnistConfig)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	model := filepath.Join(mnistDir(t), "model.onnx")
	ref := r.host + "/acme/mnist:v1"
	cmd := exec.Command(faas, "model", "push", ref, "--config", cfgPath, model, "--json")
	cmd.Env = append(os.Environ(), "FAAS_CONFIG="+filepath.Join(dir, "login.json"), "FAAS_TOKEN=")
	out, err := cmd.Output()
	var pushed struct{ Digest, Kind string }
	if err != nil || json.Unmarshal(out, &pushed) != nil || !modelartifact.ValidDigest(pushed.Digest) || pushed.Kind != "onnx" {
		t.Fatalf("faas model push: %v %s", err, out)
	}

	// The same model under another tag, the registry taken from the login:
	// the same digest.
	cmd = exec.Command(faas, "model", "push", "acme/mnist:v2", "--config", cfgPath, model)
	cmd.Env = append(os.Environ(), "FAAS_CONFIG="+filepath.Join(dir, "login.json"), "FAAS_TOKEN=")
	if out, err := cmd.Output(); err != nil || strings.TrimSpace(string(out)) != pushed.Digest {
		t.Errorf("faas model push acme/mnist:v2: %v %q, want %s", err, out, pushed.Digest)
	}

	env := append(os.Environ(), "DOCKER_CONFIG="+dockerConfig(t, r))
	for _, c := range [][]string{{crane, "manifest", ref}, {oras, "manifest", "fetch", "--plain-http", ref}} {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Env = env
		raw, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(c[1:], " "), err)
		}
		m, err := modelartifact.ParseManifest(raw, modelartifact.Limits{})
		if err != nil || modelartifact.Digest(raw) != pushed.Digest || !m.IsONNX() {
			t.Fatalf("%s %s: %v, digest %s, push printed %s:\n%s", filepath.Base(c[0]), c[1], err, modelartifact.Digest(raw), pushed.Digest, raw)
		}
		var generic struct {
			ArtifactType string `json:"artifactType"`
			Config       struct{ MediaType string }
			Layers       []struct{ MediaType string }
		}
		_ = json.Unmarshal(raw, &generic)
		if generic.ArtifactType != modelartifact.ArtifactType || generic.Config.MediaType != modelartifact.ConfigMediaType ||
			len(generic.Layers) != 1 || generic.Layers[0].MediaType != modelartifact.ONNXMediaType {
			t.Errorf("%s: manifest %s", filepath.Base(c[0]), raw)
		}
	}

	cache := t.TempDir()
	mc, err := NewModelCache(cache, r.remote(), modelartifact.Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "", Config{Models: map[string]string{"mnist": ref}, Cache: mc})
	inferMNIST(t, s.URL, "mnist")
	pulled, err := os.ReadFile(filepath.Join(cache, "sha256", strings.TrimPrefix(pushed.Digest, "sha256:"), ONNXFile))
	orig, _ := os.ReadFile(model)
	if err != nil || string(pulled) != string(orig) {
		t.Errorf("the cached model differs from the pushed one (%v)", err)
	}
	if got := s.models["mnist"].source; got != r.host+"/acme/mnist@"+pushed.Digest {
		t.Errorf("source %q: not pinned to %s", got, pushed.Digest)
	}

	// Refused: no login, and a token of no account.
	cmd = exec.Command(faas, "model", "push", ref, model)
	cmd.Env = append(os.Environ(), "FAAS_CONFIG="+filepath.Join(dir, "none.json"), "FAAS_TOKEN=")
	if err := cmd.Run(); exitCode(err) != 3 {
		t.Errorf("push without a login: %v, want exit 3", err)
	}
	bad := modelartifact.Remote{User: r.user, Token: "faas_" + strings.Repeat("A", 43)}
	if _, err := modelartifact.Push(context.Background(), bad, ref, []byte("{}"), orig, true); !errors.Is(err, modelartifact.ErrDenied) {
		t.Errorf("push with a wrong token: %v, want ErrDenied", err)
	}
}

// lockedBuffer is a buffer the server's goroutines write logs to.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type rawTaggable []byte

func (m rawTaggable) RawManifest() ([]byte, error) { return m, nil }
func (m rawTaggable) MediaType() (types.MediaType, error) {
	return modelartifact.ManifestMediaType, nil
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// inferMNIST classifies every MNIST reference digit with model over REST.
func inferMNIST(t *testing.T, url, model string, header ...string) {
	t.Helper()
	h := map[string]string{}
	for k := 0; k+1 < len(header); k += 2 {
		h[header[k]] = header[k+1]
	}
	for _, c := range mnistCases(t) {
		code, _, b := post(t, url+"/v2/models/"+model+"/infer", jsonInfer(t, c.Name, c.Input, nil), h)
		var r response
		if err := json.Unmarshal(b, &r); code != 200 || err != nil || len(r.Outputs) != 1 {
			t.Fatalf("%s: infer %s: %d %s", model, c.Name, code, b)
		}
		if got, want := argmax(r.Outputs[0].Data), argmax(floats(t, c.Want)); got != want {
			t.Errorf("%s: %s: digit %d, the reference says %d", model, c.Name, got, want)
		}
	}
}

// TestRegistryModelCache: a program pushed by tag is served pinned; a
// damaged cache entry is fetched again; a cached digest loads with the
// registry gone, a tag does not; artifacts over the limits, of another
// type, or behind wrong credentials are refused.
func TestRegistryModelCache(t *testing.T) {
	r := startRegistry(t)
	ctx := context.Background()
	progDir := filepath.Join(writeRepo(t, mnistConfig, "program"), "mnist")
	prog, err := os.ReadFile(filepath.Join(progDir, "1", ProgramFile))
	if err != nil {
		t.Fatal(err)
	}
	ref := r.host + "/acme/digits:stable"
	digest, err := modelartifact.Push(ctx, r.remote(), ref, []byte(`{"max_batch_size": 4}`), prog, false)
	if err != nil {
		t.Fatal(err)
	}
	pinned := r.host + "/acme/digits@" + digest
	cache := t.TempDir()
	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	mc, err := NewModelCache(cache, r.remote(), modelartifact.Limits{}, log)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, "", Config{Models: map[string]string{"digits": ref}, Cache: mc, Logger: log})
	inferMNIST(t, s.URL, "digits")
	if l := logs.String(); !strings.Contains(l, `"pinned":"`+pinned+`"`) || strings.Contains(l, r.token) {
		t.Errorf("the log does not name the pinned reference, or names the token:\n%s", l)
	}

	// For the record, not asserted: a fetch over the network against one
	// from the cache.
	for _, c := range []struct {
		what string
		dir  string
	}{{"network", t.TempDir()}, {"cache", cache}} {
		m, _ := NewModelCache(c.dir, r.remote(), modelartifact.Limits{}, nil)
		start := time.Now()
		if _, err := m.Fetch(ctx, pinned); err != nil {
			t.Fatal(err)
		}
		t.Logf("fetch of a %d-byte program from the %s: %v", len(prog), c.what, time.Since(start))
	}

	// A damaged entry is not served: it is fetched again.
	entry := filepath.Join(cache, "sha256", strings.TrimPrefix(digest, "sha256:"))
	b, _ := os.ReadFile(filepath.Join(entry, ProgramFile))
	b[len(b)/2] ^= 1
	if err := os.WriteFile(filepath.Join(entry, ProgramFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Fetch(ctx, pinned); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(entry, ProgramFile)); string(b) != string(prog) {
		t.Error("the damaged cache entry was not fetched again")
	}

	// Refusals, with the registry up.
	small, _ := NewModelCache(t.TempDir(), r.remote(), modelartifact.Limits{MaxModelBytes: 1000}, nil)
	if _, err := small.Fetch(ctx, ref); !errors.Is(err, modelartifact.ErrInvalid) || !strings.Contains(err.Error(), "model layer size") {
		t.Errorf("over MaxModelBytes: %v", err)
	}
	denied, _ := NewModelCache(t.TempDir(), modelartifact.Remote{User: r.user, Token: "faas_" + strings.Repeat("B", 43)}, modelartifact.Limits{}, nil)
	if _, err := denied.Fetch(ctx, ref); !errors.Is(err, modelartifact.ErrDenied) {
		t.Errorf("a wrong token: %v", err)
	}
	if _, err := mc.Fetch(ctx, r.host+"/acme/none:v1"); !errors.Is(err, ErrRepository) {
		t.Errorf("no such tag: %v", err)
	}
	// Another artifact of the same blobs, of another artifactType.
	_, raw, _ := modelartifact.NewManifest([]byte(`{"max_batch_size": 4}`), prog, false)
	raw = []byte(strings.Replace(string(raw), modelartifact.ArtifactType, "application/vnd.example.other", 1))
	otherRef, _ := name.ParseReference(r.host + "/acme/digits:other")
	auth := remote.WithAuth(&authn.Basic{Username: r.user, Password: r.token})
	if err := remote.Put(otherRef, rawTaggable(raw), auth); err != nil {
		t.Fatal(err)
	}
	if _, err := mc.Fetch(ctx, otherRef.String()); !errors.Is(err, modelartifact.ErrInvalid) || !strings.Contains(err.Error(), "artifactType") {
		t.Errorf("another artifactType: %v", err)
	}

	// The repository extension loads from the registry by the body's
	// parameters.registry_ref.
	s3 := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Cache: mc})
	body, _ := json.Marshal(map[string]any{"parameters": map[string]string{"registry_ref": ref}})
	if code, _, b := post(t, s3.URL+"/v2/repository/models/digits/load", body, nil); code != 200 || !strings.Contains(string(b), pinned) {
		t.Fatalf("load from the registry: %d %s", code, b)
	}
	inferMNIST(t, s3.URL, "digits")
	if e := stateOf(index(t, s3.URL), "digits"); e.State != StateReady || e.Version != artifactVersion {
		t.Errorf("index: %+v", e)
	}

	// With the registry gone, the pinned digest loads from the cache; a
	// tag cannot be resolved.
	r.stop()
	mc2, _ := NewModelCache(cache, r.remote(), modelartifact.Limits{}, nil)
	s2 := serve(t, "", Config{Models: map[string]string{"digits": pinned}, Cache: mc2})
	inferMNIST(t, s2.URL, "digits")
	srv, _ := New(Config{Models: map[string]string{"digits": ref}, Cache: mc2, Engines: s2.cfg.Engines})
	if err := srv.Load(ctx); err == nil || !strings.Contains(err.Error(), "resolving") {
		t.Errorf("a tag with the registry gone: %v", err)
	}
}
