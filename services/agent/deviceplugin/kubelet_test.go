package deviceplugin_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	podresources "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// The fake kubelet: its Registration service on DIR/kubelet.sock and its
// PodResources service on a socket of its own, and a client that calls a
// registered plugin as the kubelet's device manager does (dial the
// endpoint, GetDevicePluginOptions, ListAndWatch, GetPreferredAllocation,
// Allocate) and records what it allocated in PodResources.

// wait bounds every wait of the tests for something the plugin does, so
// that a broken plugin fails the test instead of hanging it; it is not a
// performance bound.
const wait = 20 * time.Second

// listDelay is how long after Allocate the fake kubelet lists a pod in
// PodResources: two of the plugin's release ticks (ReleaseEvery 50 ms).
const listDelay = 100 * time.Millisecond

type fakeKubelet struct {
	t    testing.TB
	dir  string
	regs chan *pluginapi.RegisterRequest

	mu  sync.Mutex
	srv *grpc.Server

	podsMu sync.Mutex
	pods   map[string][]*podresources.ContainerDevices // by pod name
	prSock string

	preStart bool // the plugins must ask for PreStartContainer
}

// startKubelet serves Registration on dir/kubelet.sock and PodResources
// on podres.
func startKubelet(t testing.TB, dir, podres string) *fakeKubelet {
	t.Helper()
	k := &fakeKubelet{t: t, dir: dir, regs: make(chan *pluginapi.RegisterRequest, 16),
		pods: map[string][]*podresources.ContainerDevices{}, prSock: podres}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k.listen()
	l, err := net.Listen("unix", podres)
	if err != nil {
		t.Fatal(err)
	}
	prs := grpc.NewServer()
	podresources.RegisterPodResourcesListerServer(prs, podLister{k: k})
	go prs.Serve(l)
	t.Cleanup(func() {
		prs.Stop()
		k.mu.Lock()
		k.srv.Stop()
		k.mu.Unlock()
	})
	return k
}

func (k *fakeKubelet) listen() {
	l, err := net.Listen("unix", filepath.Join(k.dir, "kubelet.sock"))
	if err != nil {
		k.t.Fatal(err)
	}
	s := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(s, registration{k: k})
	k.mu.Lock()
	k.srv = s
	k.mu.Unlock()
	go s.Serve(l)
}

// restart does what a kubelet restart does to the plugin directory: the
// old kubelet goes, the new one removes everything there and serves a new
// kubelet.sock.
func (k *fakeKubelet) restart() {
	k.mu.Lock()
	k.srv.Stop()
	k.mu.Unlock()
	ents, err := os.ReadDir(k.dir)
	if err != nil {
		k.t.Fatal(err)
	}
	for _, e := range ents {
		os.Remove(filepath.Join(k.dir, e.Name()))
	}
	k.listen()
}

// replaceSocket makes a new kubelet.sock and leaves the plugins' sockets:
// a kubelet that restarted without cleaning up.
func (k *fakeKubelet) replaceSocket() {
	k.mu.Lock()
	k.srv.Stop()
	k.mu.Unlock()
	os.Remove(filepath.Join(k.dir, "kubelet.sock"))
	k.listen()
}

type registration struct {
	pluginapi.UnimplementedRegistrationServer
	k *fakeKubelet
}

func (r registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.k.regs <- req
	return &pluginapi.Empty{}, nil
}

type podLister struct {
	podresources.UnimplementedPodResourcesListerServer
	k *fakeKubelet
}

func (p podLister) List(context.Context, *podresources.ListPodResourcesRequest) (*podresources.ListPodResourcesResponse, error) {
	p.k.podsMu.Lock()
	defer p.k.podsMu.Unlock()
	out := &podresources.ListPodResourcesResponse{}
	for name, devs := range p.k.pods {
		out.PodResources = append(out.PodResources, &podresources.PodResources{Name: name, Namespace: "default",
			Containers: []*podresources.ContainerResources{{Name: "main", Devices: devs}}})
	}
	return out, nil
}

func (podLister) GetAllocatableResources(context.Context, *podresources.AllocatableResourcesRequest) (*podresources.AllocatableResourcesResponse, error) {
	return &podresources.AllocatableResourcesResponse{}, nil
}

func (podLister) Get(context.Context, *podresources.GetPodResourcesRequest) (*podresources.GetPodResourcesResponse, error) {
	return &podresources.GetPodResourcesResponse{}, nil
}

// endPod forgets pod, as the kubelet does when its containers have ended.
func (k *fakeKubelet) endPod(pod string) {
	k.podsMu.Lock()
	delete(k.pods, pod)
	k.podsMu.Unlock()
}

// endpoint is the kubelet's connection to one registered resource.
type endpoint struct {
	t        testing.TB
	resource string
	cli      pluginapi.DevicePluginClient
	k        *fakeKubelet

	mu      sync.Mutex
	devices map[string]string // ID → health, from the last ListAndWatch message
	sends   int
	update  chan struct{}
	ended   chan struct{}
}

// accept takes the next n registrations and connects to each as the
// kubelet does, checking the options it advertises.
func (k *fakeKubelet) accept(n int) map[string]*endpoint {
	k.t.Helper()
	out := map[string]*endpoint{}
	for range n {
		var req *pluginapi.RegisterRequest
		select {
		case req = <-k.regs:
		case <-time.After(wait):
			k.t.Fatalf("no registration within %v (have %d of %d)", wait, len(out), n)
		}
		if req.Version != pluginapi.Version {
			k.t.Fatalf("registration of %s: version %q", req.ResourceName, req.Version)
		}
		if filepath.Base(req.Endpoint) != req.Endpoint {
			k.t.Fatalf("registration of %s: endpoint %q is not a file name in the plugin directory", req.ResourceName, req.Endpoint)
		}
		if !req.Options.GetGetPreferredAllocationAvailable() {
			k.t.Fatalf("registration of %s: GetPreferredAllocationAvailable not set", req.ResourceName)
		}
		out[req.ResourceName] = k.connect(req)
	}
	return out
}

func (k *fakeKubelet) connect(req *pluginapi.RegisterRequest) *endpoint {
	t := k.t
	t.Helper()
	conn, err := grpc.NewClient("unix://"+filepath.Join(k.dir, req.Endpoint), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	e := &endpoint{t: t, resource: req.ResourceName, cli: pluginapi.NewDevicePluginClient(conn), k: k,
		update: make(chan struct{}, 1), ended: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	opts, err := e.cli.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatalf("%s: GetDevicePluginOptions: %v", req.ResourceName, err)
	}
	if !opts.GetPreferredAllocationAvailable || opts.PreStartRequired != k.preStart {
		t.Fatalf("%s: options %v", req.ResourceName, opts)
	}
	sctx, scancel := context.WithCancel(context.Background())
	t.Cleanup(scancel)
	stream, err := e.cli.ListAndWatch(sctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatalf("%s: ListAndWatch: %v", req.ResourceName, err)
	}
	go func() {
		defer close(e.ended)
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			devs := map[string]string{}
			for _, d := range m.Devices {
				devs[d.ID] = d.Health
			}
			e.mu.Lock()
			e.devices, e.sends = devs, e.sends+1
			e.mu.Unlock()
			select {
			case e.update <- struct{}{}:
			default:
			}
		}
	}()
	return e
}

// await waits until the last list has every device in want with its
// health, and returns that list.
func (e *endpoint) await(what string, want map[string]string) map[string]string {
	e.t.Helper()
	deadline := time.After(wait)
	for {
		e.mu.Lock()
		cur := e.devices
		e.mu.Unlock()
		ok := cur != nil
		for id, h := range want {
			ok = ok && cur[id] == h
		}
		if ok {
			return cur
		}
		select {
		case <-e.update:
		case <-e.ended:
			e.t.Fatalf("%s: ListAndWatch ended while waiting for %s", e.resource, what)
		case <-deadline:
			e.t.Fatalf("%s: %s: want %v, have %v", e.resource, what, want, cur)
		}
	}
}

// prefer asks for size devices of avail.
func (e *endpoint) prefer(avail, must []string, size int) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := e.cli.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: avail, MustIncludeDeviceIDs: must, AllocationSize: int32(size)}}})
	if err != nil {
		return nil, err
	}
	return resp.ContainerResponses[0].DeviceIDs, nil
}

// start calls PreStartContainer for a container of ids, as the kubelet
// does before it starts one, when the plugin asks for it.
func (e *endpoint) start(ids ...string) error {
	if !e.k.preStart {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	_, err := e.cli.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: ids})
	return err
}

// allocate allocates ids to pod's container and, when the plugin agrees,
// records them in PodResources as the kubelet does.
func (e *endpoint) allocate(pod string, ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	resp, err := e.cli.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		e.t.Fatalf("%s: %d container responses for one container", e.resource, len(resp.ContainerResponses))
	}
	// The kubelet lists the pod's devices some time after Allocate
	// returns (it creates the container first): the plugin must not
	// release an allocation in that window (see ReleaseGrace).
	time.Sleep(listDelay)
	// One entry per device, as the real kubelet lists them.
	e.k.podsMu.Lock()
	for _, id := range ids {
		e.k.pods[pod] = append(e.k.pods[pod], &podresources.ContainerDevices{ResourceName: e.resource, DeviceIds: []string{id}})
	}
	e.k.podsMu.Unlock()
	return resp.ContainerResponses[0], nil
}
