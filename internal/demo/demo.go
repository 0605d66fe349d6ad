package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
)

// Password is every demo account's password.
const Password = "demo password"

// Binaries are the programs the demo runs, built into Config.Bin.
var Binaries = []string{"registry", "faasd", "hdk", "faas", "genbits", "mnist"}

// Config configures Run.
type Config struct {
	Bin      string // folder holding Binaries
	Work     string // state, keys and logs; "" a new temporary folder, removed at the end
	TestData string // the test data folder (testdata/ at the repository root; onnx/models/mnist)
	PGBin    string // PostgreSQL server binaries; "" as internal/testenv finds them
	// Wait keeps the services running after the walk-through until ctx
	// ends; without it Run stops them and returns.
	Wait bool
	Out  io.Writer
}

// Images are the reference images acme publishes; the sealed ones travel
// encrypted to the platform. Load is the one alice loads.
var (
	images = []struct {
		name   string
		sealed bool
	}{{"loopback", false}, {"alidnn", true}, {"alidnn-dual", true}}
	load = "alidnn-dual"
)

const (
	startTimeout    = 2 * time.Minute
	cmdTimeout      = 3 * time.Minute
	validateTimeout = 5 * time.Minute
)

// demo is one run's state.
type demo struct {
	cfg      Config
	ctx      context.Context
	env      []string
	root     string
	logs     string
	services []*service
	step     int
	began    time.Time
}

const steps = 10

// Run brings the platform up, walks through it and, with cfg.Wait, keeps
// it up until ctx ends. Whatever happens, it stops what it started.
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Out == nil {
		cfg.Out = io.Discard
	}
	for _, b := range Binaries {
		if _, err := os.Stat(filepath.Join(cfg.Bin, b)); err != nil {
			return fmt.Errorf("binary %s: %w (build the demo's programs first: make demo)", b, err)
		}
	}
	// Absolute, for the children and the printed commands.
	if cfg.TestData, err = filepath.Abs(cfg.TestData); err != nil {
		return err
	}
	if cfg.Bin, err = filepath.Abs(cfg.Bin); err != nil {
		return err
	}
	mnist := filepath.Join(cfg.TestData, "onnx", "models", "mnist")
	if _, err := os.Stat(filepath.Join(mnist, "model.onnx")); err != nil {
		return fmt.Errorf("MNIST model: %w (testdata/ at the repository root, or set FAAS_TESTDATA)", err)
	}
	d := &demo{cfg: cfg, ctx: ctx, root: cfg.Work, began: time.Now()}
	if d.root == "" {
		if d.root, err = os.MkdirTemp("", "faas-demo-"); err != nil {
			return err
		}
		// A failed demo keeps its folder: the services' logs say why.
		defer func() {
			if err == nil {
				os.RemoveAll(d.root)
			} else {
				d.printf("\nthe demo's folder is kept for its logs: %s\n", d.logs)
			}
		}()
	}
	d.logs = d.dir("logs")
	d.env = baseEnv(d.dir("home"))
	defer d.stopAll()
	d.printf("faas demo: working in %s, service logs in %s\n", d.root, d.logs)
	up, err := d.bringUp(mnist)
	if err != nil {
		return err
	}
	if !cfg.Wait {
		d.printf("\ndemo complete in %v; what ran:\n%s\nstopping the services\n", time.Since(d.began).Round(time.Millisecond), up)
		return nil
	}
	d.printf("\nThe platform is up (Ctrl-C stops it):\n%s", up)
	<-ctx.Done()
	d.printf("\nstopping the services\n")
	return nil
}

func (d *demo) printf(format string, args ...any) { fmt.Fprintf(d.cfg.Out, format, args...) }

// begin prints the start of a step.
func (d *demo) begin(format string, args ...any) {
	d.step++
	d.printf("\n[%d/%d] %s\n", d.step, steps, fmt.Sprintf(format, args...))
}

func (d *demo) dir(name string) string {
	p := filepath.Join(d.root, name)
	if err := os.MkdirAll(p, 0o700); err != nil {
		panic(err) // the root was just made by us
	}
	return p
}

// stopAll stops the services, last started first.
func (d *demo) stopAll() {
	for _, s := range slices.Backward(d.services) {
		s.Stop()
		if s.cleanup != nil {
			s.cleanup()
		}
	}
}

// baseEnv is the environment of every child: ours without FAAS_*, FAASD_*,
// DOCKER_CONFIG and COSIGN_PASSWORD, with HOME in the demo's folder.
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

func with(env []string, kv ...string) []string { return append(slices.Clone(env), kv...) }

// run runs Bin/name to completion and returns its stdout.
func (d *demo) run(env []string, stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(d.ctx, cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(d.cfg.Bin, name), args...)
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), &runErr{cmd: name + " " + strings.Join(args, " "), err: err, output: stdout.String() + stderr.String()}
	}
	return stdout.String(), nil
}

// serve starts Bin/name as a service.
func (d *demo) serve(env []string, name string, args ...string) (*service, error) {
	cmd := exec.Command(filepath.Join(d.cfg.Bin, name), args...)
	cmd.Env = env
	s, err := start(cmd, name, d.logs, syscall.SIGTERM)
	if err != nil {
		return nil, err
	}
	d.services = append(d.services, s)
	return s, nil
}

var listeningRE = regexp.MustCompile(`registry listening on (\S+)\n`)

// bringUp runs the steps and returns how to reach what it started.
func (d *demo) bringUp(mnist string) (string, error) {
	// 1. PostgreSQL.
	d.begin("PostgreSQL: a throwaway cluster for the registry's metadata")
	t := time.Now()
	pgDir, err := os.MkdirTemp("", "faas-demo-pg-")
	if err != nil {
		return "", err
	}
	pg, pgURL, err := postgres(d.ctx, d.cfg.PGBin, pgDir, d.logs)
	if err != nil {
		os.RemoveAll(pgDir)
		return "", fmt.Errorf("PostgreSQL: %w", err)
	}
	pg.cleanup = func() { os.RemoveAll(pgDir) }
	d.services = append(d.services, pg)
	d.printf("      %s (%v)\n", pgURL, time.Since(t).Round(time.Millisecond))

	// 2. The registry, blobs in a directory.
	d.begin("registry: accounts acme (isv), alice (tenant), ops (admin), node1 (node); blobs in a directory")
	t = time.Now()
	platformDir := filepath.Join(d.root, "platform-keys")
	regEnv := with(d.env, "FAAS_DATABASE_URL="+pgURL, "FAAS_DATA_DIR="+d.dir("registry"),
		"FAAS_KEY_DIR="+filepath.Join(d.root, "jwt"), "FAAS_PLATFORM_KEY_DIR="+platformDir)
	for _, a := range [][2]string{{"acme", "isv"}, {"alice", "tenant"}, {"ops", "admin"}, {"node1", "node"}} {
		if _, err := d.run(regEnv, Password+"\n", "registry", "users", "add", a[0], "--role", a[1]); err != nil {
			return "", err
		}
		d.printf("      $ registry users add %s --role %s\n", a[0], a[1])
	}
	reg, err := d.serve(regEnv, "registry", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off")
	if err != nil {
		return "", err
	}
	var regURL string
	err = poll(d.ctx, startTimeout, "the registry's listening line", reg, func() (bool, error) {
		if m := listeningRE.FindStringSubmatch(reg.out.String()); m != nil {
			regURL = m[1]
		}
		return regURL != "", nil
	})
	if err != nil {
		return "", err
	}
	r := &registry{url: regURL}
	if err := poll(d.ctx, startTimeout, "registry /readyz", reg, r.ready); err != nil {
		return "", err
	}
	host := strings.TrimPrefix(regURL, "http://")
	d.printf("      $ registry serve   → listening on %s, ready (%v)\n", regURL, time.Since(t).Round(time.Millisecond))

	// 3. acme publishes.
	d.begin("acme publishes the reference images: hdk keygen, build, seal, sign, push; listings")
	pushed, err := d.publish(r, host, platformDir)
	if err != nil {
		return "", err
	}

	// 4. Validation and the platform's countersignature.
	d.begin("the registry validates and countersigns every version")
	t = time.Now()
	for _, p := range pushed {
		if err := poll(d.ctx, validateTimeout, "validation of "+p.ref, reg, func() (bool, error) { return r.available(d.ctx, p.listing) }); err != nil {
			return "", err
		}
		d.printf("      %-12s available\n", p.name)
	}
	d.printf("      (%v)\n", time.Since(t).Round(time.Millisecond))

	// 5. alice subscribes; faasd starts with the node's token.
	d.begin("alice subscribes; faasd serve --sim 2 (two simulated dual-chip boards) as node1")
	for _, p := range pushed {
		if err := r.call(d.ctx, "alice", "POST", "/listings/"+p.listing+"/subscribe", nil, nil, 201); err != nil {
			return "", err
		}
	}
	d.printf("      alice subscribed to %d listings\n", len(pushed))
	n, err := r.portalListings(d.ctx)
	if err != nil {
		return "", fmt.Errorf("the portal: %w", err)
	}
	d.printf("      the portal at %s/ lists %d accelerators\n", regURL, n)
	var tok struct{ Secret string }
	if err := r.call(d.ctx, "node1", "POST", "/tokens", map[string]string{"name": "faasd"}, &tok, 201); err != nil {
		return "", err
	}
	// The registry trusts the node with data keys because it enrolls with a
	// one-time token the operator made.
	enroll, err := d.run(regEnv, "", "registry", "nodes", "enroll", "--ttl", "10m")
	if err != nil {
		return "", err
	}
	d.printf("      $ registry nodes enroll   → a one-time enrollment token for faasd\n")
	t = time.Now()
	socket := filepath.Join(d.dir("run"), "faasd.sock")
	// faasd also serves remote attach on loopback, with its own
	// certificate, which the registry pins at its first heartbeat.
	port, err := freePort()
	if err != nil {
		return "", err
	}
	remote := fmt.Sprintf("127.0.0.1:%d", port)
	faasd, err := d.serve(with(d.env, "FAAS_NODE_TOKEN="+tok.Secret, "FAAS_ENROLLMENT_TOKEN="+strings.TrimSpace(enroll)), "faasd", "serve", "--registry", regURL, "--node-user", "node1",
		"--trust-key", filepath.Join(platformDir, "platform-signing.pub"), "--sim", "2", "--sim-ddr-bytes", fmt.Sprint(1<<30),
		"--socket", socket, "--state-dir", filepath.Join(d.root, "faasd-state"), "--hostname", "demo-node",
		"--listen", remote, "--advertise", "https://"+remote, "--heartbeat", "2s")
	if err != nil {
		return "", err
	}
	if err := poll(d.ctx, startTimeout, "faasd /healthz", faasd, func() (bool, error) { return healthy(socket), nil }); err != nil {
		return "", err
	}
	d.printf("      agent on unix://%s and https://%s (%v)\n", socket, remote, time.Since(t).Round(time.Millisecond))

	// 6. alice logs in and loads the AliDNN image.
	d.begin("alice: faas login, faas load %s", load)
	alice := with(d.env, "FAAS_CONFIG="+filepath.Join(d.root, "alice-faas.json"))
	agentFlag := "--agent=unix://" + socket
	if _, err := d.run(alice, Password+"\n", "faas", "login", regURL, "-u", "alice", "--password-stdin"); err != nil {
		return "", err
	}
	d.printf("      $ faas login %s -u alice --password-stdin\n", regURL)
	ref := pushed[slices.IndexFunc(pushed, func(p published) bool { return p.name == load })].ref
	t = time.Now()
	out, err := d.run(alice, "", "faas", agentFlag, "load", "--json", ref)
	if err != nil {
		return "", err
	}
	var l agentapi.Load
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return "", fmt.Errorf("faas load --json: %w in %q", err, out)
	}
	if l.State != agentapi.LoadDone || len(l.Slots) == 0 {
		return "", fmt.Errorf("faas load %s: state %s, slots %v, error %+v", ref, l.State, l.Slots, l.Error)
	}
	var phases []string
	for _, ph := range l.Phases {
		phases = append(phases, fmt.Sprintf("%s %.0fms", ph.Name, ph.DurationMS))
	}
	d.printf("      $ faas load %s\n      loaded on slots %v in %v: %s\n", ref, l.Slots, time.Since(t).Round(time.Millisecond), strings.Join(phases, ", "))

	// 7. Status.
	d.begin("faas status")
	out, err = d.run(alice, "", "faas", agentFlag, "status")
	if err != nil {
		return "", err
	}
	d.printf("%s", indent(out))

	// 8. MNIST through the SDK.
	slot := l.Slots[0]
	d.begin("examples/mnist on slot %d: compile the model, open the slot through faasd, classify the reference digits", slot)
	args := []string{"-agent", "unix://" + socket, "-slot", fmt.Sprint(slot), "-model", filepath.Join(mnist, "model.onnx"), "-inputs", mnist, "-repeat", "4"}
	trace := filepath.Join(d.root, "mnist.trace")
	d.printf("      $ faas trace record -o %s -- mnist %s\n", trace, strings.Join(args, " "))
	out, err = d.run(with(alice, faas.TraceEnv+"="+trace), "", "mnist", args...)
	d.printf("%s", indent(out))
	if err != nil {
		return "", err
	}

	// 9. The recorded session, replayed on the board's other chip.
	replaySlot := l.Slots[len(l.Slots)-1]
	d.begin("faas trace replay: the recorded MNIST session again on slot %d, every result compared bit for bit", replaySlot)
	d.printf("      $ faas trace replay %s --slot %d\n", trace, replaySlot)
	out, err = d.run(alice, "", "faas", agentFlag, "trace", "replay", "--slot", fmt.Sprint(replaySlot), trace)
	d.printf("%s", indent(out))
	if err != nil {
		return "", err
	}

	// 10. A host without faasd attaches an accelerator from the pool.
	d.begin("a CPU-only process (no faasd on its host) attaches an accelerator from the registry's pool and runs MNIST on it")
	cpu := with(alice, "FAAS_AGENT=unix://"+filepath.Join(d.root, "no-faasd-here.sock"))
	args = []string{"-attach", "acme/" + load, "-model", filepath.Join(mnist, "model.onnx"), "-inputs", mnist}
	d.printf("      $ FAAS_AGENT=(nothing there) mnist %s\n", strings.Join(args, " "))
	out, err = d.run(cpu, "", "mnist", args...)
	d.printf("%s", indent(out))
	if err != nil {
		return "", err
	}
	out, err = d.run(alice, "", "faas", "attachments")
	if err != nil {
		return "", err
	}
	d.printf("      $ faas attachments\n%s", indent(out))

	return fmt.Sprintf("  portal    %s/   sign in as acme (isv), alice (tenant) or ops (admin); password %q\n"+
		"  registry  %s   accounts acme, alice, ops and node1 (node), same password\n"+
		"  faasd     unix://%s   slots 0-3 on two simulated boards; %s on slots %v\n"+
		"  postgres  %s\n"+
		"  logs      %s\n"+
		"  as alice: FAAS_CONFIG=%s %s %s status\n",
		regURL, Password, regURL, socket, load, l.Slots, pgURL, d.logs, filepath.Join(d.root, "alice-faas.json"), filepath.Join(d.cfg.Bin, "faas"), agentFlag), nil
}

func indent(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return "      " + strings.ReplaceAll(s, "\n", "\n      ") + "\n"
}

// published is an image pushed and listed.
type published struct {
	name, ref, digest, listing string
}

// publish is acme's part: a signing key registered with the registry, the
// reference images generated and built, sealed ones sealed to the platform,
// all signed, pushed and listed.
func (d *demo) publish(r *registry, host, platformDir string) ([]published, error) {
	isv := with(d.env, "DOCKER_CONFIG="+d.dir("docker-acme"))
	keys := filepath.Join(d.root, "isv-keys")
	if _, err := d.run(isv, "", "hdk", "keygen", "--out", keys); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(filepath.Join(keys, "isv.pub"))
	if err != nil {
		return nil, err
	}
	if err := r.call(d.ctx, "acme", "POST", "/keys", map[string]string{"public_key": string(pub)}, nil, 201); err != nil {
		return nil, err
	}
	d.printf("      $ hdk keygen; acme's public key registered\n")
	src := d.dir("src")
	if _, err := d.run(d.env, "", "genbits", "-o", src, "-small"); err != nil {
		return nil, err
	}
	if _, err := d.run(isv, Password+"\n", "hdk", "login", host, "-u", "acme", "--password-stdin"); err != nil {
		return nil, err
	}
	var out []published
	for _, im := range images {
		t := time.Now()
		layout := filepath.Join(d.root, "layouts", im.name)
		if _, err := d.run(isv, "", "hdk", "build", "-f", filepath.Join(src, im.name, "image.yaml"), "-o", layout); err != nil {
			return nil, err
		}
		if im.sealed {
			if _, err := d.run(isv, "", "hdk", "seal", "--recipient", filepath.Join(platformDir, "platform-seal.pub"), layout); err != nil {
				return nil, err
			}
		}
		if _, err := d.run(isv, "", "hdk", "sign", "--key", filepath.Join(keys, "isv.key"), layout); err != nil {
			return nil, err
		}
		ref := host + "/acme/" + im.name + ":1.0.0"
		res, err := d.run(isv, "", "hdk", "push", "--json", layout, ref)
		if err != nil {
			return nil, err
		}
		var p struct{ Digest string }
		if err := json.Unmarshal([]byte(res), &p); err != nil || !strings.HasPrefix(p.Digest, "sha256:") {
			return nil, fmt.Errorf("hdk push --json %s: %q (%v)", ref, res, err)
		}
		id, err := r.list(d.ctx, im.name, p.Digest)
		if err != nil {
			return nil, err
		}
		how := "signed"
		if im.sealed {
			how = "sealed, signed"
		}
		d.printf("      %-12s %s, pushed as %s, listed (%v)\n", im.name, how, ref, time.Since(t).Round(time.Millisecond))
		out = append(out, published{name: im.name, ref: ref, digest: p.Digest, listing: id})
	}
	return out, nil
}

// FindTestData returns the test data folder: $FAAS_TESTDATA, else testdata/
// in the repository root (the nearest folder holding go.mod at or above the
// working directory), else "". It looks nowhere outside the checkout.
func FindTestData() string {
	if env := os.Getenv("FAAS_TESTDATA"); env != "" {
		return env
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			td := filepath.Join(dir, "testdata")
			if fi, err := os.Stat(td); err == nil && fi.IsDir() {
				return td
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
