package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Password is every demo account's password.
const Password = "demo password"

// Binaries are the programs the demo runs, built into Config.Bin.
var Binaries = []string{"registry", "faasd", "hdk", "faas", "genbits", "mnist", "modelserver", "ocr"}

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

const steps = 12

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
	acme, err := r.as("acme")
	if err != nil {
		return nil, err
	}
	if _, err := acme.AddSigningKey(d.ctx, string(pub)); err != nil {
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
