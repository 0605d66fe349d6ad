package deviceplugin_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/onnx"
	"github.com/fpga-faas/faas/services/agent/deviceplugin"
)

// Pods: the end-to-end test re-runs this test binary as TestHelperPod, in
// a mount namespace of its own where the Mounts of the Allocate response
// are applied as a container runtime would, with exactly the environment
// the response gave (plus the test's instructions in FAAS_TEST_*). The pod
// classifies MNIST on its slot through faasd and is refused on the others.

// TestPodsUseOnlyTheirSlots: a pod given a whole chip and a pod given one
// AliDNN share of another chip each run MNIST on their own slot, as the
// SDK does from $FAAS_AGENT and $FAAS_ALLOCATION_TOKEN, and are refused on
// every other slot; the share pod gets one window, not two.
func TestPodsUseOnlyTheirSlots(t *testing.T) {
	mnist := testenv.TestData(t, "onnx", "models", "mnist")
	r := newRig(t, rigOptions{alidnn: []int{0, 1, 2, 3}}) // every refusal is for permission, not for an empty slot
	srv, mainSocket := r.serveAgent()
	eps := r.kubelet.accept(3)
	eps[deviceplugin.ResourceShare].await("shares", healthAll(shares("slot-3"), H))

	whole, err := eps[deviceplugin.ResourceChip].allocate("pod-a", "slot-2")
	if err != nil {
		t.Fatal(err)
	}
	share, err := eps[deviceplugin.ResourceShare].allocate("pod-b", "slot-3-share-0")
	if err != nil {
		t.Fatal(err)
	}
	a := runPod(t, whole, "FAAS_TEST_MNIST="+mnist, "FAAS_TEST_OTHERS=0,1,3")
	b := runPod(t, share, "FAAS_TEST_MNIST="+mnist, "FAAS_TEST_OTHERS=0,1,2", "FAAS_TEST_SECOND=1")
	for name, out := range map[string]string{"pod-a": a, "pod-b": b} {
		if !strings.Contains(out, "OK") {
			t.Errorf("%s: %s", name, out)
		}
	}
	// The whole chip's pod worked for the tenant that loaded the chip; the
	// share's as a tenant of its own, so it has its own fair share.
	ran := func(slot int, tenant string) bool {
		for _, u := range srv.SessionUsage(slot) {
			if (u.Tenant == tenant || strings.HasPrefix(u.Tenant, tenant)) && u.Jobs > 0 {
				return true
			}
		}
		return false
	}
	if !ran(2, "alice") {
		t.Errorf("slot 2: no jobs as alice: %+v", srv.SessionUsage(2))
	}
	if !ran(3, "alloc/") {
		t.Errorf("slot 3: no jobs as the allocation: %+v", srv.SessionUsage(3))
	}

	// Another tenant loads slot 2 (the pod's own): the pod, bound to alice
	// by its first session, may not work for the new loader.
	r.loadAliDNN(2, "mallory")
	if out := runPod(t, whole, "FAAS_TEST_OTHERS=0,1,2,3"); !strings.Contains(out, "OK") {
		t.Errorf("pod-a after mallory loaded its slot: %s", out)
	}

	// On the pod socket the test's uid (root) is nobody: a credential is
	// needed. On faasd's own socket the same uid is the operator.
	if code := get(t, r.cfg.PodSocket, ""); code != http.StatusUnauthorized {
		t.Errorf("pod socket without a credential: %d, want 401", code)
	}
	if code := get(t, mainSocket, ""); code != http.StatusOK {
		t.Errorf("faasd's socket as root: %d, want 200", code)
	}
	if code := get(t, r.cfg.PodSocket, "faasa_0123456789abcdef_"+strings.Repeat("A", 43)); code != http.StatusUnauthorized {
		t.Errorf("a forged credential: %d, want 401", code)
	}

	// The kubelet hands slot-2 on after pod-a ended: pod-a's credential
	// is dead.
	r.kubelet.endPod("pod-a")
	if _, err := eps[deviceplugin.ResourceChip].allocate("pod-c", "slot-2"); err != nil {
		t.Fatal(err)
	}
	if code := get(t, r.cfg.PodSocket, whole.Envs[deviceplugin.EnvToken]); code != http.StatusUnauthorized {
		t.Errorf("pod-a's credential after slot-2 was handed on: %d, want 401", code)
	}
}

// agentStatus serves the agent and returns the status of GET /v1/slots
// with credential tok on the pod socket.
func agentStatus(t *testing.T, r *rig, tok string) int {
	r.serveAgent()
	return get(t, r.cfg.PodSocket, tok)
}

func get(t *testing.T, socket, tok string) int {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(http.MethodGet, "http://faasd/v1/slots", nil)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// mount is one Mount of an Allocate response, for the pod to apply.
type mount struct {
	Host, Container string
	ReadOnly        bool
}

// runPod runs a pod process with resp's environment and mounts and
// returns its output.
func runPod(t *testing.T, resp *pluginapi.ContainerAllocateResponse, test ...string) string {
	t.Helper()
	var ms []mount
	for _, m := range resp.Mounts {
		ms = append(ms, mount{m.HostPath, m.ContainerPath, m.ReadOnly})
	}
	mj, _ := json.Marshal(ms)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperPod$", "-test.count=1")
	cmd.Env = append([]string{"FAAS_TEST_POD=1", "FAAS_TEST_MOUNTS=" + string(mj)}, test...)
	for k, v := range resp.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("pod: %v\n%s", err, out.String())
	}
	return out.String()
}

// TestHelperPod is the body of the pod processes; it does nothing in an
// ordinary run.
func TestHelperPod(t *testing.T) {
	if os.Getenv("FAAS_TEST_POD") == "" {
		t.Skip("helper process of TestPodsUseOnlyTheirSlots")
	}
	if err := applyMounts(os.Getenv("FAAS_TEST_MOUNTS")); err != nil {
		t.Fatalf("mounts: %v", err)
	}
	if err := pod(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("OK")
}

// applyMounts does a runtime's part: /run becomes the pod's own (a tmpfs
// in its mount namespace) and each mount is bound there.
func applyMounts(js string) error {
	var ms []mount
	if err := json.Unmarshal([]byte(js), &ms); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("tmpfs on /run: %w", err)
	}
	for _, m := range ms {
		if !strings.HasPrefix(m.Container, "/run/") {
			return fmt.Errorf("mount at %s: the test pod only mounts under /run", m.Container)
		}
		if err := os.MkdirAll(m.Container, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.Host, m.Container, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s at %s: %w", m.Host, m.Container, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", m.Container, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
				return fmt.Errorf("read-only %s: %w", m.Container, err)
			}
		}
	}
	return nil
}

// pod is what a tenant's container does with its devices.
func pod() error {
	ctx := context.Background()
	c, err := faas.Dial(ctx, "", faas.WithToken(os.Getenv("FAAS_ALLOCATION_TOKEN")))
	if err != nil {
		return err
	}
	defer c.Close()
	slot, err := strconv.Atoi(strings.Split(os.Getenv("FAAS_SLOTS"), ",")[0])
	if err != nil {
		return fmt.Errorf("FAAS_SLOTS %q: %w", os.Getenv("FAAS_SLOTS"), err)
	}
	for _, o := range strings.Split(os.Getenv("FAAS_TEST_OTHERS"), ",") {
		n, _ := strconv.Atoi(o)
		d, err := c.Open(ctx, n)
		if err == nil {
			d.Close()
			return fmt.Errorf("opened slot %d, which is not the pod's", n)
		}
		if !errors.Is(err, faas.ErrPermission) {
			return fmt.Errorf("slot %d: %w, want a permission error", n, err)
		}
	}
	dir := os.Getenv("FAAS_TEST_MNIST")
	if dir == "" {
		return nil
	}
	dev, err := c.Open(ctx, slot)
	if err != nil {
		return fmt.Errorf("slot %d: %w", slot, err)
	}
	defer dev.Close()
	if os.Getenv("FAAS_TEST_SECOND") != "" {
		d, err := c.Open(ctx, slot)
		if err == nil {
			d.Close()
			return errors.New("a second session on a one-share allocation")
		}
		if !errors.Is(err, faas.ErrQuota) {
			return fmt.Errorf("a second session: %w, want a quota error", err)
		}
	}
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		return err
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		return err
	}
	cases, err := classify.ReadCases(dir)
	if err != nil {
		return err
	}
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog)
	if err != nil {
		return err
	}
	defer s.Close(ctx)
	out, err := classify.Run(ctx, s, prog, cases, 1)
	if err != nil {
		return err
	}
	return classify.Check(out)
}
