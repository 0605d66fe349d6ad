package k8se2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// registryURL is where the registry listens inside the namespace.
const registryURL = "http://127.0.0.1:5000"

// nodePassword is the node account's password in the throwaway registry.
const nodePassword = "k8s e2e node password"

// Node is faasd on simulated boards with its device plugin, and the
// registry it needs (faasd registers its node there before it serves),
// on a PostgreSQL database the caller provides.
type Node struct {
	Bin, Dir string
	// Socket is faasd's operator socket; PodSocket the socket whose
	// directory Allocate mounts into containers.
	Socket, PodSocket, CDIDir string

	logs     string
	registry *proc
	faasd    *proc
	regEnv   []string
	token    string
}

// StartNode starts the registry on databaseURL and faasd serve
// --device-plugin --sim 2 with extra flags, binaries from bin, files
// under dir, logs in logs.
func StartNode(ctx context.Context, bin, dir, logs, databaseURL string, extra ...string) (_ *Node, err error) {
	n := &Node{Bin: bin, Dir: dir, logs: logs, Socket: filepath.Join(dir, "faasd", "faasd.sock"),
		PodSocket: filepath.Join(dir, "faasd-pods", "faasd.sock"), CDIDir: filepath.Join(dir, "cdi")}
	n.regEnv = []string{"FAAS_DATABASE_URL=" + databaseURL, "FAAS_DATA_DIR=" + filepath.Join(dir, "registry"),
		"FAAS_KEY_DIR=" + filepath.Join(dir, "jwt"), "FAAS_PLATFORM_KEY_DIR=" + filepath.Join(dir, "platform-keys"),
		"HOME=" + dir}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if _, err := n.run(ctx, nodePassword+"\n", "users", "add", "node1", "--role", "node"); err != nil {
		return nil, err
	}
	n.registry = newProc(logs, "registry", filepath.Join(bin, "registry"), "serve", "--listen", strings.TrimPrefix(registryURL, "http://"), "--metrics-listen", "off")
	n.registry.env = n.regEnv
	if err := n.registry.start(); err != nil {
		return nil, err
	}
	if err := poll(ctx, startTimeout, "registry /readyz", func() (bool, error) { return httpOK(registryURL + "/readyz") }, n.registry); err != nil {
		return nil, err
	}
	// faasd signs in with the account's password, as the dev overlay's
	// faasd does (deploy/k8s/overlays/dev): the registry takes it wherever
	// it takes an API token.
	n.token = nodePassword
	enroll, err := n.run(ctx, "", "nodes", "enroll", "--ttl", "10m")
	if err != nil {
		return nil, err
	}
	n.faasd = newProc(logs, "faasd", filepath.Join(bin, "faasd"), append([]string{"serve",
		"--registry", registryURL, "--node-user", "node1",
		"--trust-key", filepath.Join(dir, "platform-keys", "platform-signing.pub"),
		"--sim", "2", "--sim-ddr-bytes", fmt.Sprint(1 << 28), "--hostname", NodeName,
		"--socket", n.Socket, "--state-dir", filepath.Join(dir, "faasd-state"), "--heartbeat", "5s",
		"--device-plugin", "--pod-socket", n.PodSocket, "--cdi-spec-dir", n.CDIDir}, extra...)...)
	n.faasd.env = []string{"FAAS_NODE_TOKEN=" + n.token, "FAAS_ENROLLMENT_TOKEN=" + strings.TrimSpace(enroll), "HOME=" + dir}
	return n, n.StartFaasd(ctx)
}

// run runs a registry subcommand on the registry's database and keys.
func (n *Node) run(ctx context.Context, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(n.Bin, "registry"), args...)
	cmd.Env = append(os.Environ(), n.regEnv...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("registry %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// StartFaasd starts faasd (again) and waits for its plugin to register
// with the kubelet (again).
func (n *Node) StartFaasd(ctx context.Context) error {
	before := logCount(n.faasd.log, "registered with the kubelet")
	if err := n.faasd.start(); err != nil {
		return err
	}
	return poll(ctx, startTimeout, "faasd's device plugin to register", func() (bool, error) {
		return logCount(n.faasd.log, "registered with the kubelet") > before, nil
	}, n.faasd)
}

// StopFaasd stops faasd (SIGTERM).
func (n *Node) StopFaasd() { n.faasd.stop() }

// SetFaasdFlags replaces faasd's extra flags for its next start.
func (n *Node) SetFaasdFlags(extra ...string) {
	i := len(n.faasd.args)
	for j, a := range n.faasd.args {
		if a == "--cdi-spec-dir" {
			i = j + 2
		}
	}
	n.faasd.args = append(n.faasd.args[:i:i], extra...)
}

// FaasdLog is the path of faasd's log.
func (n *Node) FaasdLog() string { return n.faasd.log }

// Check returns an error if faasd or the registry has exited.
func (n *Node) Check() error {
	if err := n.registry.exitErr(); err != nil {
		return err
	}
	return n.faasd.exitErr()
}

// Stop stops faasd and the registry.
func (n *Node) Stop() {
	for _, p := range []*proc{n.faasd, n.registry} {
		if p != nil {
			p.stop()
		}
	}
}

// logCount counts the lines of the log at path holding s.
func logCount(path, s string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), s)
}

// httpOK reports whether a GET of url answers 200.
func httpOK(url string) (bool, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return false, err
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK, fmt.Errorf("GET %s: %s", url, resp.Status)
}

// logLines returns the lines of the log at path holding s.
func logLines(path, s string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}
