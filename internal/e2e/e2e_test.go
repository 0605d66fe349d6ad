package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/sdk/traceevent"
)

// Generous bounds: the test runs under -race on loaded 2-core machines.
const (
	startTimeout = 3 * time.Minute
	cmdTimeout   = 3 * time.Minute
	validateWait = 5 * time.Minute
	pollEvery    = 100 * time.Millisecond
)

// password is every account's password.
const password = "correct horse battery staple"

// Exit codes of faas (sdk/cmd/faas/main.go).
const exitNotEntitled = 3

// bin is the folder TestMain built the binaries into; buildErr says why it
// could not.
var (
	bin      string
	buildErr error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "faas-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	bin = dir
	buildErr = build(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the mains the test runs into dir.
func build(dir string) error {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return errors.New("not inside the module")
	}
	cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"./services/cmd/registry", "./services/cmd/faasd", "./services/cmd/modelserver", "./hdk/cmd/hdk", "./sdk/cmd/faas", "./bitstreams/images/cmd/genbits")
	cmd.Dir = filepath.Dir(gomod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// lockedBuffer is a goroutine-safe buffer.
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

// tail returns the last lines of s.
func tail(s string) string {
	const max = 8 << 10
	if len(s) > max {
		s = s[len(s)-max:]
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
		s = "...\n" + s
	}
	return s
}

// baseEnv is the environment of every child: ours without FAAS_*, FAASD_*,
// DOCKER_CONFIG and COSIGN_PASSWORD, with HOME in a fresh directory.
func baseEnv(home string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "FAAS_") || strings.HasPrefix(k, "FAASD_") || k == "DOCKER_CONFIG" || k == "COSIGN_PASSWORD" || k == "HOME" || k == "XDG_CONFIG_HOME" {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
}

// server is a long-running child process.
type server struct {
	name   string
	cmd    *exec.Cmd
	stdout *lockedBuffer
	stderr *lockedBuffer
	done   chan struct{}
}

// startServer starts bin/name with args and kills it when the test ends,
// printing the tail of its output if the test failed.
func startServer(t testing.TB, env []string, name string, args ...string) *server {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = env
	s := &server{name: name, cmd: cmd, stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = s.stdout, s.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
		if t.Failed() {
			t.Logf("%s stdout:\n%s\n%s stderr:\n%s", name, tail(s.stdout.String()), name, tail(s.stderr.String()))
		}
		if strings.Contains(s.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("%s reported a data race", name)
		}
	})
	return s
}

func (s *server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// result is the outcome of a short-lived command.
type result struct {
	stdout, stderr string
	code           int
}

// run runs bin/name with args and stdin to completion.
func run(t testing.TB, env []string, stdin, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, name), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ctx.Err() == nil:
		r.code = ee.ExitCode()
	default:
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, tail(r.stdout), tail(r.stderr))
	}
	return r
}

// must runs bin/name like run and fails the test unless it exits 0.
func must(t testing.TB, env []string, stdin, name string, args ...string) string {
	t.Helper()
	r := run(t, env, stdin, name, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), r.code, tail(r.stdout), tail(r.stderr))
	}
	return r.stdout
}

// poll calls cond until it returns true, failing after timeout.
func poll(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("waiting for %s: %v", what, t.Context().Err())
		case <-time.After(pollEvery):
		}
	}
}

// as is a client of the registry's /api/v1 at base as user, with the
// test password.
func as(t testing.TB, base, user string) *registryclient.Client {
	t.Helper()
	c, err := registryclient.New(base, registryclient.WithBasicAuth(user, password),
		registryclient.WithHTTPClient(&http.Client{Timeout: cmdTimeout}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newToken makes an API token of user named name and returns its secret.
func newToken(t testing.TB, base, user, name string) string {
	t.Helper()
	tok, err := as(t, base, user).CreateToken(t.Context(), registryapi.NewToken{Name: name})
	if err != nil {
		t.Fatalf("a token of %s: %v", user, err)
	}
	return tok.Secret
}

// publishListing lists image (the ISV's acme/image) publicly with isv's
// client, adds digest to it as version and publishes it, which enqueues its
// validation.
func publishListing(t testing.TB, isv *registryclient.Client, image, version, digest string) registryapi.Listing {
	t.Helper()
	ctx := t.Context()
	l, err := isv.CreateListing(ctx, registryapi.NewListing{Repository: "acme/" + image,
		ListingFields: registryapi.ListingFields{Name: new(image), Visibility: new("public")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := isv.AddVersion(ctx, l.ID, registryapi.NewVersion{Version: version, Digest: digest}); err != nil {
		t.Fatal(err)
	}
	if _, err := isv.Publish(ctx, l.ID, true); err != nil {
		t.Fatal(err)
	}
	return l
}

// agentClient talks HTTP to faasd's unix socket, with faasd's own uid: the
// operator.
func agentClient(socket string) *http.Client {
	return &http.Client{
		Timeout: cmdTimeout,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		}},
	}
}

// ddrAddr and ddrLen are the DDR window the test writes and reads back.
const (
	ddrAddr = 0x10000
	ddrLen  = 4096
)

func ddrURL(slot int) string {
	return fmt.Sprintf("http://faasd/v1/slots/%d/ddr?addr=%#x&len=%d", slot, ddrAddr, ddrLen)
}

// writeDDR writes data into slot's DDR at ddrAddr through the operator's
// diagnostics endpoint.
func writeDDR(t testing.TB, c *http.Client, slot int, data []byte) {
	t.Helper()
	b, _ := json.Marshal(map[string]string{"data": base64.StdEncoding.EncodeToString(data)})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, ddrURL(slot), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT DDR of slot %d: %d %s", slot, resp.StatusCode, body)
	}
}

// readDDR reads ddrLen bytes of slot's DDR at ddrAddr.
func readDDR(t testing.TB, c *http.Client, slot int) []byte {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, ddrURL(slot), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET DDR of slot %d: %d %s", slot, resp.StatusCode, body)
	}
	var out struct{ Data string }
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	data, err := base64.StdEncoding.DecodeString(out.Data)
	if err != nil || len(data) != ddrLen {
		t.Fatalf("GET DDR of slot %d: %d bytes, %v", slot, len(data), err)
	}
	return data
}

// pushed is an image pushed to the registry and listed there.
type pushed struct {
	ref     string // host:port/acme/repo:tag
	digest  string
	listing string
}

var listeningRE = regexp.MustCompile(`registry listening on (\S+)\n`)

// platform is the registry (PostgreSQL + MinIO) running as a process, with
// ISV acme's loopback and alidnn-dual images pushed, signed, validated and
// countersigned, tenant alice subscribed to both, and an admin, ops.
type platform struct {
	root        string
	env         []string
	regEnv      []string // the registry command's environment
	regURL      string
	reg         *server     // the registry process, for tests that kill it
	pg          *testenv.PG // its database, for tests that restart it
	platformDir string
	began       time.Time
	loopback    pushed
	dual        pushed
}

func (p *platform) dir(t testing.TB, name string) string {
	d := filepath.Join(p.root, name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

// newPlatform starts it; regArgs are more flags of `registry serve`.
func newPlatform(t testing.TB, regArgs ...string) *platform {
	t.Helper()
	if buildErr != nil {
		t.Fatalf("building the binaries: %v", buildErr)
	}
	began := time.Now()
	pg := testenv.Postgres(t)
	s3 := testenv.MinIO(t)
	root := t.TempDir()
	dir := func(name string) string {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := baseEnv(dir("home"))

	// The registry: PostgreSQL for metadata, MinIO for blobs.
	platformDir := filepath.Join(root, "platform")
	regEnv := append(slices.Clone(env),
		"FAAS_DATABASE_URL="+pg.URL,
		"FAAS_S3_ENDPOINT="+s3.Endpoint,
		"FAAS_S3_ACCESS_KEY="+s3.AccessKey,
		"FAAS_S3_SECRET_KEY="+s3.SecretKey,
		"FAAS_S3_BUCKET=faas-e2e",
		"FAAS_DATA_DIR="+dir("registry"),
		"FAAS_KEY_DIR="+filepath.Join(root, "jwt"),
		"FAAS_PLATFORM_KEY_DIR="+platformDir,
	)
	for _, a := range []struct{ name, role string }{{"acme", "isv"}, {"alice", "tenant"}, {"bob", "tenant"}, {"node1", "node"}, {"ops", "admin"}} {
		out := must(t, regEnv, password+"\n", "registry", "users", "add", a.name, "--role", a.role)
		if !strings.Contains(out, "created "+a.role+" account "+a.name) {
			t.Fatalf("registry users add %s: %q", a.name, out)
		}
	}
	// No metrics listener: its default, 127.0.0.1:5001, is one address for
	// every registry on the host, and other packages' tests run at once.
	reg := startServer(t, regEnv, "registry", append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off"}, regArgs...)...)
	var regURL string
	poll(t, startTimeout, "the registry's listening line", func() bool {
		if reg.exited() {
			t.Fatalf("registry exited: %v\n%s", reg.cmd.ProcessState, tail(reg.stderr.String()))
		}
		m := listeningRE.FindStringSubmatch(reg.stdout.String())
		if m != nil {
			regURL = m[1]
		}
		return m != nil
	})
	host := strings.TrimPrefix(regURL, "http://")
	poll(t, startTimeout, "registry /readyz", func() bool {
		resp, err := http.Get(regURL + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	t.Logf("registry ready at %s after %v", regURL, time.Since(began).Round(time.Millisecond))

	// The ISV: a signing key registered with the registry, the reference
	// images built, loopback plain and alidnn-dual sealed to the platform,
	// both signed and pushed with hdk.
	isvEnv := append(slices.Clone(env), "DOCKER_CONFIG="+dir("docker-acme"))
	keys := filepath.Join(root, "isv-keys")
	must(t, isvEnv, "", "hdk", "keygen", "--out", keys)
	pub, err := os.ReadFile(filepath.Join(keys, "isv.pub"))
	if err != nil {
		t.Fatal(err)
	}
	acme := as(t, regURL, "acme")
	if _, err := acme.AddSigningKey(t.Context(), string(pub)); err != nil {
		t.Fatal(err)
	}
	src := dir("src")
	must(t, env, "", "genbits", "-o", src, "-small")
	must(t, isvEnv, password+"\n", "hdk", "login", host, "-u", "acme", "--password-stdin")

	push := func(image string, sealed bool) pushed {
		t.Helper()
		layout := filepath.Join(root, "layouts", image)
		must(t, isvEnv, "", "hdk", "build", "-f", filepath.Join(src, image, "image.yaml"), "-o", layout)
		if sealed {
			must(t, isvEnv, "", "hdk", "seal", "--recipient", filepath.Join(platformDir, "platform-seal.pub"), layout)
			if _, err := os.Stat(layout + ".keys.json"); err != nil {
				t.Fatalf("hdk seal wrote no keys file: %v", err)
			}
		}
		must(t, isvEnv, "", "hdk", "sign", "--key", filepath.Join(keys, "isv.key"), layout)
		ref := host + "/acme/" + image + ":1.0.0"
		var out struct {
			Digest     string
			Signatures int
			Keys       string
		}
		if err := json.Unmarshal([]byte(must(t, isvEnv, "", "hdk", "push", "--json", layout, ref)), &out); err != nil {
			t.Fatalf("hdk push --json: %v", err)
		}
		if out.Signatures != 1 || (out.Keys != "") != sealed || !strings.HasPrefix(out.Digest, "sha256:") {
			t.Fatalf("hdk push %s: %+v", image, out)
		}
		l := publishListing(t, acme, image, "1.0.0", out.Digest)
		return pushed{ref: ref, digest: out.Digest, listing: l.ID}
	}
	loopback := push("loopback", false)
	dual := push("alidnn-dual", true)

	// Validation countersigns both.
	for _, p := range []pushed{loopback, dual} {
		poll(t, validateWait, "validation of "+p.ref, func() bool {
			vs, err := acme.Versions(t.Context(), p.listing, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(vs.Items) != 1 {
				t.Fatalf("versions of %s: %+v", p.ref, vs.Items)
			}
			switch vs.Items[0].State {
			case "pending", "validating":
				return false
			case "available":
				return true
			}
			t.Fatalf("validation of %s ended %q", p.ref, vs.Items[0].State)
			return false
		})
	}
	// The countersignature is in the registry beside the ISV's signature:
	// hdk verify finds a signature by each key on its own.
	for _, p := range []pushed{loopback, dual} {
		for _, key := range []string{filepath.Join(keys, "isv.pub"), filepath.Join(platformDir, "platform-signing.pub")} {
			var v struct{ Signatures int }
			if err := json.Unmarshal([]byte(must(t, isvEnv, "", "hdk", "verify", "--json", "--key", key, p.ref)), &v); err != nil || v.Signatures < 1 {
				t.Fatalf("hdk verify --key %s %s: %+v %v", filepath.Base(key), p.ref, v, err)
			}
		}
	}
	t.Logf("images pushed, validated and countersigned after %v", time.Since(began).Round(time.Millisecond))

	// alice subscribes to both; bob to nothing.
	for _, p := range []pushed{loopback, dual} {
		if _, err := as(t, regURL, "alice").Subscribe(t.Context(), p.listing); err != nil {
			t.Fatal(err)
		}
	}

	return &platform{root: root, env: env, regEnv: regEnv, regURL: regURL, reg: reg, pg: pg, platformDir: platformDir, began: began,
		loopback: loopback, dual: dual}
}

// startFaasd runs faasd on two simulated boards (slots 0-3), trusting the
// platform's countersigning key, and waits until it answers.
func (p *platform) startFaasd(t testing.TB, socket, stateDir string, extra ...string) (*server, *http.Client) {
	t.Helper()
	tok := newToken(t, p.regURL, "node1", "faasd")
	// The node enrolls with a one-time token the operator made, so that the
	// registry trusts it with keys.
	enroll := strings.TrimSpace(must(t, p.regEnv, "", "registry", "nodes", "enroll", "--ttl", "10m"))
	if !strings.HasPrefix(enroll, "fne_") {
		t.Fatalf("registry nodes enroll: %q", enroll)
	}
	faasdEnv := append(slices.Clone(p.env), "FAAS_NODE_TOKEN="+tok, "FAAS_ENROLLMENT_TOKEN="+enroll)
	args := append([]string{"serve", "--registry", p.regURL, "--node-user", "node1",
		"--trust-key", filepath.Join(p.platformDir, "platform-signing.pub"), "--sim", "2", "--sim-ddr-bytes", fmt.Sprint(1 << 30),
		"--socket", socket, "--state-dir", stateDir, "--hostname", "e2e-node"}, extra...)
	faasd := startServer(t, faasdEnv, "faasd", args...)
	agent := agentClient(socket)
	poll(t, startTimeout, "faasd /healthz", func() bool {
		if faasd.exited() {
			t.Fatalf("faasd exited: %v\n%s", faasd.cmd.ProcessState, tail(faasd.stderr.String()))
		}
		resp, err := agent.Get("http://faasd/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return faasd, agent
}

// modelRunOnSlot runs the MNIST reference model with `faas model run
// --slot` on an AliDNN slot of faasd, for both reference inputs, and
// compares the scores with the reference outputs.
func modelRunOnSlot(t *testing.T, env []string, agentFlag string, slot int) {
	t.Helper()
	const tolerance = 5e-3 // testdata/README.md's, for fp32 models
	dir := testenv.TestData(t, "onnx/models/mnist")
	for _, set := range []string{"test_data_set_0", "test_data_set_1"} {
		out := filepath.Join(t.TempDir(), "out.pb")
		res := must(t, env, "", "faas", agentFlag, "model", "run", "--json", "--slot", fmt.Sprint(slot),
			"--input", filepath.Join(dir, set, "input_0.pb"), "--output", out, filepath.Join(dir, "model.onnx"))
		var st struct {
			DeviceNS uint64 `json:"device_ns"`
		}
		if err := json.Unmarshal([]byte(res), &st); err != nil || st.DeviceNS == 0 {
			t.Fatalf("faas model run --json: %q (%v)", res, err)
		}
		worst := mnistWorst(t, out, filepath.Join(dir, set, "output_0.pb"))
		if worst > tolerance {
			t.Errorf("%s on slot %d: scores differ from the reference by %g (tolerance %g)", set, slot, worst, tolerance)
		}
		t.Logf("faas model run --slot %d, %s: %v on the device, worst difference %.2g", slot, set, time.Duration(st.DeviceNS), worst)
	}

	// Profiled: every job of three runs in a profile log, exported as a
	// Chrome trace that passes the format's checks.
	work := t.TempDir()
	profile, trace := filepath.Join(work, "mnist.profile"), filepath.Join(work, "mnist.trace.json")
	must(t, env, "", "faas", agentFlag, "model", "run", "--slot", fmt.Sprint(slot), "--runs", "3", "--profile", profile,
		"--input", filepath.Join(dir, "test_data_set_0", "input_0.pb"), filepath.Join(dir, "model.onnx"))
	f, err := os.Open(profile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	plog, err := faas.ReadProfileLog(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(plog.Profiles) < 3 || plog.Slot != slot {
		t.Fatalf("profile log of 3 runs on slot %d: %d jobs on slot %d", slot, len(plog.Profiles), plog.Slot)
	}
	for _, p := range plog.Profiles {
		if p.Failed || p.Engine <= 0 || p.Stats.Cycles == 0 || p.Stats.MACs == 0 || p.RoundTrip() < p.Engine {
			t.Fatalf("job profile %+v", p)
		}
	}
	must(t, env, "", "faas", "trace", "export", "--json", profile, "-o", trace)
	data, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	tracks, err := traceevent.Validate(data)
	if err != nil {
		t.Fatal(err)
	}
	if compute := tracks[fmt.Sprintf("slot %d (AliDNN engine)/compute", slot)]; compute != len(plog.Profiles) {
		t.Errorf("%d compute slices for %d jobs; tracks %v", compute, len(plog.Profiles), tracks)
	}
	t.Logf("faas trace export: %d jobs, tracks %v", len(plog.Profiles), tracks)

	// Recorded: a program's session becomes a trace that replays bit for
	// bit on the slot, and refuses to once altered.
	rec := filepath.Join(work, "mnist.trace")
	must(t, env, "", "faas", "trace", "record", "-o", rec, "--", filepath.Join(bin, "faas"), agentFlag, "model", "run",
		"--slot", fmt.Sprint(slot), "--input", filepath.Join(dir, "test_data_set_1", "input_0.pb"), filepath.Join(dir, "model.onnx"))
	var rep struct {
		Identical bool `json:"identical"`
		Jobs      int  `json:"jobs"`
		Reads     int  `json:"reads"`
	}
	out := must(t, env, "", "faas", agentFlag, "trace", "replay", "--json", "--slot", fmt.Sprint(slot), rec)
	if err := json.Unmarshal([]byte(out), &rep); err != nil || !rep.Identical || rep.Jobs == 0 || rep.Reads == 0 {
		t.Fatalf("faas trace replay: %s (%v)", out, err)
	}
	raw, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0xff
	if err := os.WriteFile(rec, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, env, "", "faas", agentFlag, "trace", "replay", "--slot", fmt.Sprint(slot), rec); r.code != 2 || !strings.Contains(r.stderr, "altered") {
		t.Errorf("replay of an altered trace: exit %d, %s", r.code, r.stderr)
	}
	t.Logf("faas trace replay: %d jobs, %d reads identical", rep.Jobs, rep.Reads)
}

// mnistWorst returns the largest difference between the scores in out
// and the reference scores in want (ONNX tensor files).
func mnistWorst(t *testing.T, out, ref string) float64 {
	t.Helper()
	got, err := onnx.ReadTensor(out)
	if err != nil {
		t.Fatal(err)
	}
	want, err := onnx.ReadTensor(ref)
	if err != nil {
		t.Fatal(err)
	}
	g, err := got.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	w, err := want.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	if len(g) != len(w) {
		t.Fatalf("%s: %d scores, want %d", out, len(g), len(w))
	}
	worst := 0.0
	for k := range w {
		worst = max(worst, math.Abs(float64(g[k])-float64(w[k])))
	}
	return worst
}

func TestEndToEnd(t *testing.T) {
	p := newPlatform(t)
	root, env, regURL, began, loopback, dual := p.root, p.env, p.regURL, p.began, p.loopback, p.dual
	dir := func(name string) string { return p.dir(t, name) }
	socket := filepath.Join(dir("run"), "faasd.sock")
	_, agent := p.startFaasd(t, socket, filepath.Join(root, "faasd-state"))
	t.Logf("faasd ready after %v", time.Since(began).Round(time.Millisecond))

	// The tenants log in, each with their own configuration.
	faasEnv := func(who string) []string {
		return append(slices.Clone(env), "FAAS_CONFIG="+filepath.Join(root, who+"-faas.json"))
	}
	alice, bob := faasEnv("alice"), faasEnv("bob")
	must(t, alice, password+"\n", "faas", "login", regURL, "-u", "alice", "--password-stdin")
	must(t, bob, password+"\n", "faas", "login", regURL, "-u", "bob", "--password-stdin")
	agentFlag := "--agent=unix://" + socket

	load := func(p pushed, wantSlots []int) {
		t.Helper()
		start := time.Now()
		out := must(t, alice, "", "faas", agentFlag, "load", "--json", p.ref)
		var l agentapi.Load
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("faas load --json: %v in %q", err, out)
		}
		if l.State != agentapi.LoadDone || l.Kind != "load" || l.Image.Digest != p.digest || !slices.Equal(l.Slots, wantSlots) || l.Tenant != "alice" {
			t.Fatalf("faas load %s: state %s kind %s digest %s slots %v tenant %q, want done load %s %v alice (error %+v)",
				p.ref, l.State, l.Kind, l.Image.Digest, l.Slots, l.Tenant, p.digest, wantSlots, l.Error)
		}
		var phases []string
		for _, ph := range l.Phases {
			phases = append(phases, ph.Name)
		}
		for _, want := range []string{agentapi.PhaseResolve, agentapi.PhaseVerify, agentapi.PhasePull, agentapi.PhaseProgram, agentapi.PhaseSelfTest} {
			if !slices.Contains(phases, want) {
				t.Errorf("faas load %s: phases %v lack %s", p.ref, phases, want)
			}
		}
		t.Logf("faas load %s: slots %v, phases %v, %v", p.ref, l.Slots, phases, time.Since(start).Round(time.Millisecond))
	}
	status := func() map[int]agentapi.Slot {
		t.Helper()
		out := must(t, alice, "", "faas", agentFlag, "status", "--json")
		var ss []agentapi.Slot
		if err := json.Unmarshal([]byte(out), &ss); err != nil {
			t.Fatalf("faas status --json: %v in %q", err, out)
		}
		m := map[int]agentapi.Slot{}
		for _, s := range ss {
			m[s.Index] = s
		}
		if len(m) != 4 {
			t.Fatalf("faas status: %d slots, want 4: %s", len(m), out)
		}
		return m
	}

	// A tenant without a subscription is refused the sealed image, before
	// any chip is touched.
	r := run(t, bob, "", "faas", agentFlag, "load", dual.ref)
	if r.code != exitNotEntitled || !strings.Contains(r.stderr, "hint:") {
		t.Errorf("faas load %s as bob: exit %d, want %d with a hint\nstdout:\n%s\nstderr:\n%s", dual.ref, r.code, exitNotEntitled, r.stdout, r.stderr)
	} else {
		var msg []string
		for _, l := range strings.Split(r.stderr, "\n") {
			if strings.HasPrefix(l, "faas: ") || strings.HasPrefix(l, "hint: ") {
				msg = append(msg, l)
			}
		}
		t.Logf("bob refused (exit %d): %s", r.code, strings.Join(msg, " / "))
	}
	for i, s := range status() {
		if s.State != agentapi.Cleared {
			t.Errorf("after bob's refused load slot %d is %s, want cleared", i, s.State)
		}
	}

	// The ISV pushes another image over a listed version with crane:
	// refused, and the tag keeps its image, which alice loads below.
	overwriteVersion(t, append(slices.Clone(env), "DOCKER_CONFIG="+dir("docker-acme")), dual, loopback)

	// alice loads both: loopback on chip 0 of board 0, the dual image on
	// board 1, the first board with both chips free.
	load(loopback, []int{0})
	load(dual, []int{2, 3})
	st := status()
	for i, want := range map[int]pushed{0: loopback, 2: dual, 3: dual} {
		s := st[i]
		if s.State != agentapi.Loaded || s.Image == nil || s.Image.Digest != want.digest || s.Tenant != "alice" {
			t.Errorf("faas status: slot %d: state %s image %+v tenant %q, want loaded %s by alice", i, s.State, s.Image, s.Tenant, want.digest)
		}
	}
	if s := st[1]; s.State != agentapi.Cleared {
		t.Errorf("faas status: slot 1 is %s, want cleared", s.State)
	}
	// faasd reports the loads under their grants (in the background):
	// three slot loads reach alice's usage, and each key release of the
	// sealed image is audited with its grant.
	poll(t, startTimeout, "alice's usage of three slot loads", func() bool {
		sum, err := as(t, regURL, "alice").UsageSummary(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, it := range sum.Items {
			n += it.Loads
		}
		return n == 3
	})
	if s := st[0]; s.Role == nil || s.Role.Name != "loopback" {
		t.Errorf("faas status: slot 0 role %+v, want loopback", s.Role)
	}
	if s := st[2]; s.Role == nil || s.Role.Name != "alidnn" {
		t.Errorf("faas status: slot 2 role %+v, want alidnn", s.Role)
	}
	modelRunOnSlot(t, alice, agentFlag, 2)
	mnist := testenv.TestData(t, "onnx/models/mnist")
	if r := run(t, bob, "", "faas", agentFlag, "model", "run", "--slot", "2",
		"--input", filepath.Join(mnist, "test_data_set_0", "input_0.pb"), filepath.Join(mnist, "model.onnx")); r.code != exitNotEntitled {
		t.Errorf("faas model run --slot 2 as bob: exit %d, want %d (alice's slot)\n%s", r.code, exitNotEntitled, r.stderr)
	}
	var d agentapi.Slot
	if err := json.Unmarshal([]byte(must(t, alice, "", "faas", agentFlag, "describe", "3", "--json")), &d); err != nil {
		t.Fatal(err)
	}
	if d.State != agentapi.Loaded || d.Image == nil || d.Image.Digest != dual.digest || d.Sensors == nil {
		t.Errorf("faas describe 3: %+v", d)
	}

	// The tenants' data in DDR, as a running accelerator would leave it.
	pattern := make([]byte, ddrLen)
	for i := range pattern {
		pattern[i] = byte(i*7 + 1)
	}
	loaded := []int{0, 2, 3}
	for _, i := range loaded {
		writeDDR(t, agent, i, pattern)
		if got := readDDR(t, agent, i); !bytes.Equal(got, pattern) {
			t.Fatalf("slot %d: DDR does not read back what was written", i)
		}
	}

	// faas clear: slot 0, and slot 2, which clears the dual image's board.
	for _, i := range []int{0, 2} {
		out := must(t, alice, "", "faas", agentFlag, "clear", fmt.Sprint(i))
		if !strings.HasPrefix(out, fmt.Sprintf("slot %d cleared", i)) {
			t.Errorf("faas clear %d: %q", i, out)
		}
	}
	for i, s := range status() {
		if s.State != agentapi.Cleared || s.Image != nil || s.Tenant != "" {
			t.Errorf("after faas clear: slot %d: state %s image %+v tenant %q, want cleared and empty", i, s.State, s.Image, s.Tenant)
		}
	}
	// The clears reach alice's usage too, under their loads' grants: one
	// record per cleared slot (0, 2 and 3).
	poll(t, startTimeout, "alice's usage of three slot clears", func() bool {
		sum, err := as(t, regURL, "alice").UsageSummary(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, it := range sum.Items {
			n += it.Clears
		}
		return n == 3
	})
	zero := make([]byte, ddrLen)
	for _, i := range loaded {
		if got := readDDR(t, agent, i); !bytes.Equal(got, zero) {
			t.Errorf("slot %d: DDR holds %d non-zero bytes after faas clear", i, ddrLen-bytes.Count(got, []byte{0}))
		}
	}
	t.Logf("end to end in %v", time.Since(began).Round(time.Millisecond))
}
