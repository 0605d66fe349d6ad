package k8se2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The cluster's addresses. The harness runs in a network namespace of its
// own (namespace.go) holding only loopback and a veth pair (both ends
// inside) with NodeIP, from TEST-NET-1 (RFC 5737), which no network
// routes: there is no default route, so no component can reach anything
// outside.
const (
	NodeIP      = "192.0.2.10"
	NodeName    = "faas-node"
	apiPort     = 6443
	etcdClient  = "http://127.0.0.1:2379"
	etcdPeer    = "http://127.0.0.1:2380"
	serviceCIDR = "10.96.0.0/24"
	serviceIP   = "10.96.0.1"
	// KubeletDir is the kubelet's root directory. Its device plugin and
	// PodResources sockets are at fixed paths under it, so the namespace
	// binds a directory of the run over it.
	KubeletDir = "/var/lib/kubelet"
)

// startTimeout bounds the start of one component.
const startTimeout = 3 * time.Minute

// Cluster is etcd, the API server, the scheduler, the controller manager,
// faas-cri and the kubelet, started from Bin with their files under Dir.
type Cluster struct {
	Bin, Dir string
	// Created is the file faas-cri records CreateContainer requests in.
	Created string
	API     *API
	pki     *pki
	logs    string

	etcd, apiserver, scheduler, controllers, cri, kubelet *proc
}

// StartCluster makes the certificates and starts every component, each
// ready before the next starts.
func StartCluster(ctx context.Context, bin, dir string) (_ *Cluster, err error) {
	c := &Cluster{Bin: bin, Dir: dir, logs: filepath.Join(dir, "logs"), Created: filepath.Join(dir, "cri-created.jsonl")}
	for _, d := range []string{c.logs, c.path("etcd"), KubeletDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := c.makePKI(); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	defer func() {
		if err != nil {
			c.Stop()
		}
	}()
	if c.API, err = newAPI(fmt.Sprintf("https://%s:%d", NodeIP, apiPort), c.pki); err != nil {
		return nil, err
	}
	steps := []func(context.Context) error{c.startEtcd, c.startAPIServer, c.startControlPlane, c.startCRI, c.StartKubelet}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *Cluster) path(name string) string { return filepath.Join(c.Dir, name) }

// Logs is the directory of the components' logs.
func (c *Cluster) Logs() string { return c.logs }

func (c *Cluster) makePKI() error {
	p, err := newPKI(c.path("pki"))
	if err != nil {
		return err
	}
	c.pki = p
	api := fmt.Sprintf("https://%s:%d", NodeIP, apiPort)
	issue := []struct {
		name, cn string
		orgs     []string
		hosts    []string
	}{
		{"apiserver", "kube-apiserver", nil, []string{NodeIP, "127.0.0.1", serviceIP, "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}},
		{"admin", "e2e-admin", []string{"system:masters"}, nil},
		{"apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil},
		{"scheduler", "system:kube-scheduler", nil, nil},
		{"controller-manager", "system:kube-controller-manager", nil, nil},
		{"kubelet", "system:node:" + NodeName, []string{"system:nodes"}, nil},
		{"kubelet-serving", "system:node:" + NodeName, []string{"system:nodes"}, []string{NodeIP, NodeName}},
	}
	for _, i := range issue {
		if err := p.issue(i.name, i.cn, i.orgs, i.hosts...); err != nil {
			return err
		}
	}
	for _, k := range []string{"admin", "scheduler", "controller-manager", "kubelet"} {
		if _, err := p.kubeconfig(k, api); err != nil {
			return err
		}
	}
	return p.serviceAccountKey()
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	c.etcd = newProc(c.logs, "etcd", filepath.Join(c.Bin, "etcd"),
		"--name", "e2e", "--data-dir", c.path("etcd"),
		"--listen-client-urls", etcdClient, "--advertise-client-urls", etcdClient,
		"--listen-peer-urls", etcdPeer, "--initial-advertise-peer-urls", etcdPeer,
		"--initial-cluster", "e2e="+etcdPeer, "--listen-metrics-urls", "http://127.0.0.1:2381",
		"--unsafe-no-fsync", "--log-level", "warn")
	if err := c.etcd.start(); err != nil {
		return err
	}
	return poll(ctx, startTimeout, "etcd /health", func() (bool, error) {
		return httpOK("http://127.0.0.1:2381/health")
	}, c.etcd)
}

func (c *Cluster) startAPIServer(ctx context.Context) error {
	p := c.pki.path
	c.apiserver = newProc(c.logs, "kube-apiserver", filepath.Join(c.Bin, "kube-apiserver"),
		"--etcd-servers", etcdClient,
		"--bind-address", NodeIP, "--secure-port", fmt.Sprint(apiPort), "--advertise-address", NodeIP,
		"--service-cluster-ip-range", serviceCIDR,
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", "NodeRestriction,PodSecurity",
		"--client-ca-file", p("ca.crt"), "--tls-cert-file", p("apiserver.crt"), "--tls-private-key-file", p("apiserver.key"),
		"--kubelet-client-certificate", p("apiserver-kubelet-client.crt"), "--kubelet-client-key", p("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority", p("ca.crt"), "--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", p("sa.pub"),
		"--service-account-signing-key-file", p("sa.key"),
		"--allow-privileged", "--cert-dir", c.path("apiserver-certs"), "--v", "1")
	if err := c.apiserver.start(); err != nil {
		return err
	}
	return poll(ctx, startTimeout, "kube-apiserver /readyz", func() (bool, error) {
		_, err := c.API.raw(ctx, "GET", "/readyz", nil)
		return err == nil, err
	}, c.etcd, c.apiserver)
}

// startControlPlane starts the scheduler and the controller manager and
// waits for the default service account, which pods need.
func (c *Cluster) startControlPlane(ctx context.Context) error {
	p := c.pki.path
	c.scheduler = newProc(c.logs, "kube-scheduler", filepath.Join(c.Bin, "kube-scheduler"),
		"--kubeconfig", p("scheduler.kubeconfig"), "--authentication-kubeconfig", p("scheduler.kubeconfig"),
		"--authorization-kubeconfig", p("scheduler.kubeconfig"), "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "10259", "--v", "2")
	// Each controller under its own service account, as kubeadm runs them:
	// the controller manager's own role does not reach nodes (the node
	// controller lifts the not-ready taint).
	c.controllers = newProc(c.logs, "kube-controller-manager", filepath.Join(c.Bin, "kube-controller-manager"),
		"--kubeconfig", p("controller-manager.kubeconfig"), "--authentication-kubeconfig", p("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", p("controller-manager.kubeconfig"), "--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", "10257",
		"--service-account-private-key-file", p("sa.key"), "--root-ca-file", p("ca.crt"),
		"--use-service-account-credentials", "--service-cluster-ip-range", serviceCIDR)
	for _, pr := range []*proc{c.scheduler, c.controllers} {
		if err := pr.start(); err != nil {
			return err
		}
	}
	return poll(ctx, startTimeout, "the default service account", func() (bool, error) {
		_, err := c.API.raw(ctx, "GET", "/api/v1/namespaces/default/serviceaccounts/default", nil)
		return err == nil, err
	}, c.apiserver, c.scheduler, c.controllers)
}

func (c *Cluster) criSocket() string { return c.path("cri.sock") }

func (c *Cluster) startCRI(ctx context.Context) error {
	c.cri = newProc(c.logs, "faas-cri", filepath.Join(c.Bin, "faas-cri"), "-socket", c.criSocket(), "-record", c.Created)
	if err := c.cri.start(); err != nil {
		return err
	}
	return poll(ctx, startTimeout, "faas-cri's socket", func() (bool, error) {
		_, err := os.Stat(c.criSocket())
		return err == nil, nil
	}, c.cri)
}

// kubeletConfig is the kubelet's configuration: no cgroups of its own
// (the fake runtime runs nothing), eviction off, and short sync periods.
func (c *Cluster) kubeletConfig() string {
	p := c.pki.path
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
tlsCertFile: %s
tlsPrivateKeyFile: %s
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
failCgroupV1: false
localStorageCapacityIsolation: false
evictionHard: {}
mergeDefaultEvictionSettings: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
resolvConf: ""
syncFrequency: 10s
nodeStatusUpdateFrequency: 5s
serializeImagePulls: false
`, NodeIP, p("ca.crt"), p("kubelet-serving.crt"), p("kubelet-serving.key"), c.criSocket())
}

// StartKubelet starts the kubelet (again) and waits until its node is
// Ready and untainted.
func (c *Cluster) StartKubelet(ctx context.Context) error {
	if c.kubelet == nil {
		cfg := c.path("kubelet.yaml")
		if err := os.WriteFile(cfg, []byte(c.kubeletConfig()), 0o644); err != nil {
			return err
		}
		c.kubelet = newProc(c.logs, "kubelet", filepath.Join(c.Bin, "kubelet"),
			"--config", cfg, "--kubeconfig", c.pki.path("kubelet.kubeconfig"), "--root-dir", KubeletDir,
			"--hostname-override", NodeName, "--node-ip", NodeIP, "--v", "4")
	}
	started := time.Now().Truncate(time.Second) // heartbeats have seconds
	if err := c.kubelet.start(); err != nil {
		return err
	}
	return poll(ctx, startTimeout, "node "+NodeName+" Ready and untainted", func() (bool, error) {
		n, err := c.API.Node(ctx, NodeName)
		if err != nil {
			return false, err
		}
		// The node controller lifts the not-ready taint after Ready; until
		// then the scheduler places nothing.
		if len(n.Spec.Taints) > 0 {
			return false, fmt.Errorf("taints %v", n.Spec.Taints)
		}
		for _, cond := range n.Status.Conditions {
			// After a restart, only a heartbeat of this kubelet counts.
			if cond.Type == "Ready" && !cond.LastHeartbeatTime.Time.Before(started) {
				return cond.Status == "True", fmt.Errorf("Ready=%s: %s", cond.Status, cond.Message)
			}
		}
		return false, errNotYet
	}, c.kubelet, c.cri)
}

// StopKubelet stops the kubelet; the pods' containers stay in faas-cri.
func (c *Cluster) StopKubelet() { c.kubelet.stop() }

// Stop stops every component, the last started first.
func (c *Cluster) Stop() {
	for _, p := range []*proc{c.kubelet, c.cri, c.controllers, c.scheduler, c.apiserver, c.etcd} {
		if p != nil {
			p.stop()
		}
	}
}

// Check returns an error naming every component that has exited.
func (c *Cluster) Check() error {
	var errs []error
	for _, p := range []*proc{c.etcd, c.apiserver, c.scheduler, c.controllers, c.cri, c.kubelet} {
		if p != nil {
			errs = append(errs, p.exitErr())
		}
	}
	return errors.Join(errs...)
}

// LogHas reports whether component's log holds s.
func (c *Cluster) LogHas(component, s string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(c.logs, component+".log"))
	return strings.Contains(string(b), s), err
}
