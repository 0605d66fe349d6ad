package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/registryapi"
)

// platform is what bringUp has started, as the later steps reach it.
type platform struct {
	pgURL       string
	regURL      string
	reg         *service
	r           *registry
	regEnv      []string // the registry command's environment
	platformDir string   // the platform's keys
	pushed      []published
	socket      string   // faasd's
	alice       []string // alice's environment for the faas CLI
	agentFlag   string
	slots       []int  // where alice's image is loaded
	modelURL    string // the model server's REST API
}

// bringUp runs the steps and returns how to reach what it started.
func (d *demo) bringUp(mnist string) (string, error) {
	p := &platform{}
	steps := []func(*platform) error{
		d.startPostgres,
		d.startRegistry,
		d.publishImages,
		d.awaitValidation,
		d.startFaasd,
		d.loadImage,
		d.status,
		func(p *platform) error { return d.classify(p, mnist) },
		func(p *platform) error { return d.attachFromPool(p, mnist) },
		func(p *platform) error { return d.serveModels(p, mnist) },
		d.readText,
	}
	for _, step := range steps {
		if err := step(p); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("  portal    %s/   sign in as acme (isv), alice (tenant) or ops (admin); password %q\n"+
		"  registry  %s   accounts acme, alice, ops and node1 (node), same password\n"+
		"  faasd     unix://%s   slots 0-3 on two simulated boards; %s on slots %v\n"+
		"  models    %s/v2   the model server (Open Inference Protocol): MNIST on slot %d\n"+
		"  postgres  %s\n"+
		"  logs      %s\n"+
		"  as alice: FAAS_CONFIG=%s %s %s status\n",
		p.regURL, Password, p.regURL, p.socket, load, p.slots, p.modelURL, p.slots[0], p.pgURL, d.logs, filepath.Join(d.root, "alice-faas.json"), filepath.Join(d.cfg.Bin, "faas"), p.agentFlag), nil
}

// startPostgres is step 1: a PostgreSQL cluster for the registry.
func (d *demo) startPostgres(p *platform) error {
	d.begin("PostgreSQL: a throwaway cluster for the registry's metadata")
	t := time.Now()
	pgDir, err := os.MkdirTemp("", "faas-demo-pg-")
	if err != nil {
		return err
	}
	pg, pgURL, err := postgres(d.ctx, d.cfg.PGBin, pgDir, d.logs)
	if err != nil {
		os.RemoveAll(pgDir)
		return fmt.Errorf("PostgreSQL: %w", err)
	}
	pg.cleanup = func() { os.RemoveAll(pgDir) }
	d.services = append(d.services, pg)
	p.pgURL = pgURL
	d.printf("      %s (%v)\n", pgURL, time.Since(t).Round(time.Millisecond))
	return nil
}

var listeningRE = regexp.MustCompile(`registry listening on (\S+)\n`)

// startRegistry is step 2: the registry's accounts, then the registry,
// blobs in a directory.
func (d *demo) startRegistry(p *platform) error {
	d.begin("registry: accounts acme (isv), alice (tenant), ops (admin), node1 (node); blobs in a directory")
	t := time.Now()
	p.platformDir = filepath.Join(d.root, "platform-keys")
	p.regEnv = with(d.env, "FAAS_DATABASE_URL="+p.pgURL, "FAAS_DATA_DIR="+d.dir("registry"),
		"FAAS_KEY_DIR="+filepath.Join(d.root, "jwt"), "FAAS_PLATFORM_KEY_DIR="+p.platformDir)
	for _, a := range [][2]string{{"acme", "isv"}, {"alice", "tenant"}, {"ops", "admin"}, {"node1", "node"}} {
		if _, err := d.run(p.regEnv, Password+"\n", "registry", "users", "add", a[0], "--role", a[1]); err != nil {
			return err
		}
		d.printf("      $ registry users add %s --role %s\n", a[0], a[1])
	}
	reg, err := d.serve(p.regEnv, "registry", "serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off")
	if err != nil {
		return err
	}
	p.reg = reg
	err = poll(d.ctx, startTimeout, "the registry's listening line", reg, func() (bool, error) {
		if m := listeningRE.FindStringSubmatch(reg.out.String()); m != nil {
			p.regURL = m[1]
		}
		return p.regURL != "", nil
	})
	if err != nil {
		return err
	}
	p.r = &registry{url: p.regURL}
	if err := poll(d.ctx, startTimeout, "registry /readyz", reg, p.r.ready); err != nil {
		return err
	}
	d.printf("      $ registry serve   → listening on %s, ready (%v)\n", p.regURL, time.Since(t).Round(time.Millisecond))
	return nil
}

// publishImages is step 3: acme publishes.
func (d *demo) publishImages(p *platform) error {
	d.begin("acme publishes the reference images: hdk keygen, build, seal, sign, push; listings")
	pushed, err := d.publish(p.r, strings.TrimPrefix(p.regURL, "http://"), p.platformDir)
	p.pushed = pushed
	return err
}

// awaitValidation is step 4: validation and the platform's
// countersignature.
func (d *demo) awaitValidation(p *platform) error {
	d.begin("the registry validates and countersigns every version")
	t := time.Now()
	for _, pub := range p.pushed {
		if err := poll(d.ctx, validateTimeout, "validation of "+pub.ref, p.reg, func() (bool, error) { return p.r.available(d.ctx, pub.listing) }); err != nil {
			return err
		}
		d.printf("      %-12s available\n", pub.name)
	}
	d.printf("      (%v)\n", time.Since(t).Round(time.Millisecond))
	return nil
}

// startFaasd is step 5: alice subscribes; faasd starts with the node's
// token.
func (d *demo) startFaasd(p *platform) error {
	d.begin("alice subscribes; faasd serve --sim 2 (two simulated dual-chip boards) as node1")
	r := p.r
	alice, err := r.as("alice")
	if err != nil {
		return err
	}
	for _, pub := range p.pushed {
		if _, err := alice.Subscribe(d.ctx, pub.listing); err != nil {
			return err
		}
	}
	d.printf("      alice subscribed to %d listings\n", len(p.pushed))
	n, err := r.portalListings(d.ctx)
	if err != nil {
		return fmt.Errorf("the portal: %w", err)
	}
	d.printf("      the portal at %s/ lists %d accelerators\n", p.regURL, n)
	node1, err := r.as("node1")
	if err != nil {
		return err
	}
	tok, err := node1.CreateToken(d.ctx, registryapi.NewToken{Name: "faasd"})
	if err != nil {
		return err
	}
	// The registry trusts the node with data keys because it enrolls with a
	// one-time token the operator made.
	enroll, err := d.run(p.regEnv, "", "registry", "nodes", "enroll", "--ttl", "10m")
	if err != nil {
		return err
	}
	d.printf("      $ registry nodes enroll   → a one-time enrollment token for faasd\n")
	t := time.Now()
	p.socket = filepath.Join(d.dir("run"), "faasd.sock")
	// faasd also serves remote attach on loopback, with its own
	// certificate, which the registry pins at its first heartbeat.
	port, err := freePort()
	if err != nil {
		return err
	}
	remote := fmt.Sprintf("127.0.0.1:%d", port)
	faasd, err := d.serve(with(d.env, "FAAS_NODE_TOKEN="+tok.Secret, "FAAS_ENROLLMENT_TOKEN="+strings.TrimSpace(enroll)), "faasd", "serve", "--registry", p.regURL, "--node-user", "node1",
		"--trust-key", filepath.Join(p.platformDir, "platform-signing.pub"), "--sim", "2", "--sim-ddr-bytes", fmt.Sprint(1<<30),
		"--socket", p.socket, "--state-dir", filepath.Join(d.root, "faasd-state"), "--hostname", "demo-node",
		"--listen", remote, "--advertise", "https://"+remote, "--heartbeat", "2s")
	if err != nil {
		return err
	}
	if err := poll(d.ctx, startTimeout, "faasd /healthz", faasd, func() (bool, error) { return healthy(p.socket), nil }); err != nil {
		return err
	}
	d.printf("      agent on unix://%s and https://%s (%v)\n", p.socket, remote, time.Since(t).Round(time.Millisecond))
	return nil
}

// loadImage is step 6: alice logs in and loads the AliDNN image.
func (d *demo) loadImage(p *platform) error {
	d.begin("alice: faas login, faas load %s", load)
	p.alice = with(d.env, "FAAS_CONFIG="+filepath.Join(d.root, "alice-faas.json"))
	p.agentFlag = "--agent=unix://" + p.socket
	if _, err := d.run(p.alice, Password+"\n", "faas", "login", p.regURL, "-u", "alice", "--password-stdin"); err != nil {
		return err
	}
	d.printf("      $ faas login %s -u alice --password-stdin\n", p.regURL)
	ref := p.pushed[slices.IndexFunc(p.pushed, func(p published) bool { return p.name == load })].ref
	t := time.Now()
	out, err := d.run(p.alice, "", "faas", p.agentFlag, "load", "--json", ref)
	if err != nil {
		return err
	}
	var l agentapi.Load
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		return fmt.Errorf("faas load --json: %w in %q", err, out)
	}
	if l.State != agentapi.LoadDone || len(l.Slots) == 0 {
		return fmt.Errorf("faas load %s: state %s, slots %v, error %+v", ref, l.State, l.Slots, l.Error)
	}
	p.slots = l.Slots
	var phases []string
	for _, ph := range l.Phases {
		phases = append(phases, fmt.Sprintf("%s %.0fms", ph.Name, ph.DurationMS))
	}
	d.printf("      $ faas load %s\n      loaded on slots %v in %v: %s\n", ref, l.Slots, time.Since(t).Round(time.Millisecond), strings.Join(phases, ", "))
	return nil
}

// status is step 7.
func (d *demo) status(p *platform) error {
	d.begin("faas status")
	out, err := d.run(p.alice, "", "faas", p.agentFlag, "status")
	if err != nil {
		return err
	}
	d.printf("%s", indent(out))
	return nil
}

// classify is steps 8 and 9: MNIST through the SDK, recorded, and the
// recorded session replayed on the board's other chip.
func (d *demo) classify(p *platform, mnist string) error {
	slot := p.slots[0]
	d.begin("examples/mnist on slot %d: compile the model, open the slot through faasd, classify the reference digits", slot)
	args := []string{"-agent", "unix://" + p.socket, "-slot", fmt.Sprint(slot), "-model", filepath.Join(mnist, "model.onnx"), "-inputs", mnist, "-repeat", "4"}
	trace := filepath.Join(d.root, "mnist.trace")
	d.printf("      $ faas trace record -o %s -- mnist %s\n", trace, strings.Join(args, " "))
	out, err := d.run(with(p.alice, faas.TraceEnv+"="+trace), "", "mnist", args...)
	d.printf("%s", indent(out))
	if err != nil {
		return err
	}

	replaySlot := p.slots[len(p.slots)-1]
	d.begin("faas trace replay: the recorded MNIST session again on slot %d, every result compared bit for bit", replaySlot)
	d.printf("      $ faas trace replay %s --slot %d\n", trace, replaySlot)
	out, err = d.run(p.alice, "", "faas", p.agentFlag, "trace", "replay", "--slot", fmt.Sprint(replaySlot), trace)
	d.printf("%s", indent(out))
	return err
}

// attachFromPool is step 10: a host without faasd attaches an accelerator
// from the pool.
func (d *demo) attachFromPool(p *platform, mnist string) error {
	d.begin("a CPU-only process (no faasd on its host) attaches an accelerator from the registry's pool and runs MNIST on it")
	cpu := with(p.alice, "FAAS_AGENT=unix://"+filepath.Join(d.root, "no-faasd-here.sock"))
	args := []string{"-attach", "acme/" + load, "-model", filepath.Join(mnist, "model.onnx"), "-inputs", mnist}
	d.printf("      $ FAAS_AGENT=(nothing there) mnist %s\n", strings.Join(args, " "))
	out, err := d.run(cpu, "", "mnist", args...)
	d.printf("%s", indent(out))
	if err != nil {
		return err
	}
	out, err = d.run(p.alice, "", "faas", "attachments")
	if err != nil {
		return err
	}
	d.printf("      $ faas attachments\n%s", indent(out))
	return nil
}
