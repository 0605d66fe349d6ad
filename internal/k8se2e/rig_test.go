//go:build k8se2e

package k8se2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fpga-faas/faas/internal/testenv"
)

// The harness's inputs, which `make k8s-e2e` sets.
const (
	envBin     = "FAAS_K8S_E2E_BIN"      // etcd, the Kubernetes components and faas-cri
	envFaasBin = "FAAS_K8S_E2E_FAAS_BIN" // faasd and registry
	envDir     = "FAAS_K8S_E2E_DIR"      // the run's directory, emptied first
)

func TestMain(m *testing.M) {
	dir := os.Getenv(envDir)
	if dir == "" || os.Getenv(envBin) == "" || os.Getenv(envFaasBin) == "" {
		fmt.Fprintf(os.Stderr, "k8s e2e: %s, %s and %s must be set: run `make k8s-e2e`\n", envBin, envFaasBin, envDir)
		os.Exit(2)
	}
	os.Exit(Main(m, dir))
}

// waitTimeout bounds every wait for the cluster to reach a state.
const waitTimeout = 2 * time.Minute

const (
	resChip  = "faas.dev/chip"
	resBoard = "faas.dev/board"
	resShare = "faas.dev/alidnn-share"
)

// rig is the running cluster and node the subtests share.
type rig struct {
	ctx context.Context
	c   *Cluster
	n   *Node
}

// startRig brings up the cluster and faasd in the run's directory.
func startRig(t *testing.T) *rig {
	t.Helper()
	ctx := t.Context()
	dir := os.Getenv(envDir)
	began := time.Now()
	c, err := StartCluster(ctx, os.Getenv(envBin), dir)
	if err != nil {
		t.Fatalf("cluster: %v (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	t.Cleanup(c.Stop)
	t.Logf("cluster up in %v", time.Since(began).Round(time.Millisecond))
	pg := testenv.Postgres(t)
	n, err := StartNode(ctx, os.Getenv(envFaasBin), dir, c.Logs(), pg.URL)
	if err != nil {
		t.Fatalf("faasd: %v (logs in %s)", err, c.Logs())
	}
	t.Cleanup(n.Stop)
	t.Logf("cluster and faasd up in %v; logs in %s", time.Since(began).Round(time.Millisecond), c.Logs())
	return &rig{ctx: ctx, c: c, n: n}
}

// check fails the test if a component has exited.
func (r *rig) check(t *testing.T) {
	t.Helper()
	if err := r.c.Check(); err != nil {
		t.Fatal(err)
	}
	if err := r.n.Check(); err != nil {
		t.Fatal(err)
	}
}

// counts is a node's figure of each faas.dev resource.
type counts map[string]int64

func (c counts) String() string {
	return fmt.Sprintf("chip=%d board=%d share=%d", c[resChip], c[resBoard], c[resShare])
}

func figures(l corev1.ResourceList) counts {
	out := counts{}
	for _, r := range []string{resChip, resBoard, resShare} {
		q := l[corev1.ResourceName(r)]
		out[r] = q.Value()
	}
	return out
}

// waitAllocatable waits until the node's allocatable figures (what the
// scheduler fits pods against) are want.
func (r *rig) waitAllocatable(t *testing.T, want counts) {
	t.Helper()
	var got counts
	err := poll(r.ctx, waitTimeout, "allocatable "+want.String(), func() (bool, error) {
		n, err := r.c.API.Node(r.ctx, NodeName)
		if err != nil {
			return false, err
		}
		got = figures(n.Status.Allocatable)
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("%v; node allocatable %v", err, got)
	}
}

// pod is a pod in default asking n of res in its only container.
func pod(name, res string, n int64) *corev1.Pod {
	no := false
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			EnableServiceLinks:           &no,
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example/faas-e2e:1.0.0",
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceName(res): *resource.NewQuantity(n, resource.DecimalSI)},
				},
			}},
		},
	}
}

// run creates p and waits until it is Running.
func (r *rig) run(t *testing.T, p *corev1.Pod) {
	t.Helper()
	if err := r.c.API.CreatePod(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	r.awaitRunning(t, p.Name)
}

// awaitRunning waits until pod name of default is Running.
func (r *rig) awaitRunning(t *testing.T, name string) {
	t.Helper()
	var last *corev1.Pod
	err := poll(r.ctx, waitTimeout, "pod "+name+" Running", func() (bool, error) {
		got, err := r.c.API.Pod(r.ctx, "default", name)
		if err != nil {
			return false, err
		}
		last = got
		return got.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("%v; status %+v", err, last.Status)
	}
}

// remove deletes a pod and waits until it is gone.
func (r *rig) remove(t *testing.T, name string) {
	t.Helper()
	if err := r.c.API.DeletePod(r.ctx, "default", name); err != nil {
		t.Fatal(err)
	}
	err := poll(r.ctx, waitTimeout, "pod "+name+" gone", func() (bool, error) {
		return r.c.API.Gone(r.ctx, "default", name)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Created is a CreateContainer request as faas-cri recorded it
// (components/cmd/faas-cri).
type Created struct {
	Namespace  string            `json:"namespace"`
	Pod        string            `json:"pod"`
	PodUID     string            `json:"pod_uid"`
	Container  string            `json:"container"`
	Env        map[string]string `json:"env"`
	Mounts     []CreatedMount    `json:"mounts"`
	Devices    []string          `json:"devices"`
	CDIDevices []string          `json:"cdi_devices"`
}

// CreatedMount is one mount of a recorded container.
type CreatedMount struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	ReadOnly      bool   `json:"readonly"`
}

// created returns the last CreateContainer request of a pod.
func (r *rig) created(t *testing.T, name string) Created {
	t.Helper()
	last, err := r.lastCreated(func(c Created) bool { return c.Namespace == "default" && c.Pod == name })
	if err != nil {
		t.Fatal(err)
	}
	if last == nil {
		t.Fatalf("faas-cri recorded no container of pod %s", name)
	}
	return *last
}

// lastCreated returns the last CreateContainer request that match
// accepts, or nil.
func (r *rig) lastCreated(match func(Created) bool) (*Created, error) {
	f, err := os.Open(r.c.Created)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var last *Created
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c Created
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s: %w", r.c.Created, err)
		}
		if match(c) {
			last = &c
		}
	}
	return last, sc.Err()
}

// slotsOf is the FAAS_SLOTS the runtime was given for a pod's container.
func (r *rig) slotsOf(t *testing.T, name string) string {
	t.Helper()
	return r.created(t, name).Env["FAAS_SLOTS"]
}

// waitPending waits until the scheduler reports why a pod cannot be
// scheduled, and returns its message.
func (r *rig) waitPending(t *testing.T, name, want string) string {
	t.Helper()
	var msg string
	err := poll(r.ctx, waitTimeout, "pod "+name+" unschedulable", func() (bool, error) {
		p, err := r.c.API.Pod(r.ctx, "default", name)
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodPending {
			return false, fmt.Errorf("phase %s", p.Status.Phase)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				msg = c.Message
			}
		}
		return strings.Contains(msg, want), nil
	})
	if err != nil {
		t.Fatalf("%v; last message %q", err, msg)
	}
	return msg
}

// sameSet reports whether two comma-separated lists hold the same items.
func sameSet(a, b string) bool {
	x, y := strings.Split(a, ","), strings.Split(b, ",")
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}
