// Command faas-cri is the container runtime of the Kubernetes test
// harness (internal/k8se2e): the kubelet talks CRI to it on a unix socket.
// It serves the fake runtime of k8s.io/cri-client/pkg/fake, which keeps
// sandboxes and containers in memory and runs nothing, and records every
// CreateContainer request (environment, mounts, device nodes and CDI
// names) as one JSON line in -record, so that the tests see what the
// device plugin's Allocate gave a container the way a real runtime gets it.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/cri-client/pkg/fake"
)

// Created is one recorded CreateContainer request. The tests decode the
// same shape (internal/k8se2e).
type Created struct {
	Namespace  string            `json:"namespace"`
	Pod        string            `json:"pod"`
	PodUID     string            `json:"pod_uid"`
	Container  string            `json:"container"`
	Env        map[string]string `json:"env"`
	Mounts     []Mount           `json:"mounts"`
	Devices    []string          `json:"devices"`
	CDIDevices []string          `json:"cdi_devices"`
}

// Mount is one mount of a recorded container.
type Mount struct {
	ContainerPath string `json:"container_path"`
	HostPath      string `json:"host_path"`
	ReadOnly      bool   `json:"readonly"`
}

// runtime is the fake runtime with CreateContainer recorded and the
// containers' log paths reported.
type runtime struct {
	*fake.RemoteRuntime
	mu   sync.Mutex
	out  *os.File
	logs map[string]string // container ID → its log file
}

func (r *runtime) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	if err := r.record(req); err != nil {
		return nil, fmt.Errorf("faas-cri: recording the request: %w", err)
	}
	resp, err := r.RemoteRuntime.CreateContainer(ctx, req)
	if err != nil || req.GetConfig().GetLogPath() == "" {
		return resp, err
	}
	r.mu.Lock()
	r.logs[resp.ContainerId] = filepath.Join(req.GetSandboxConfig().GetLogDirectory(), req.GetConfig().GetLogPath())
	r.mu.Unlock()
	return resp, nil
}

// ContainerStatus reports the container's log path, as a real runtime
// does and the fake does not: the kubelet removes the files matching
// LOGPATH* when it removes a container, so an empty path would make it
// remove every file of its working directory.
func (r *runtime) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := r.RemoteRuntime.ContainerStatus(ctx, req)
	if err != nil || resp.GetStatus() == nil {
		return resp, err
	}
	r.mu.Lock()
	path, ok := r.logs[req.ContainerId]
	r.mu.Unlock()
	if !ok {
		// Never an empty path (see above): one that matches nothing.
		path = filepath.Join(os.TempDir(), "faas-cri-no-log", req.ContainerId)
	}
	resp.Status.LogPath = path
	return resp, nil
}

func (r *runtime) record(req *runtimeapi.CreateContainerRequest) error {
	c := Created{Env: map[string]string{}}
	if m := req.GetSandboxConfig().GetMetadata(); m != nil {
		c.Namespace, c.Pod, c.PodUID = m.Namespace, m.Name, m.Uid
	}
	cfg := req.GetConfig()
	c.Container = cfg.GetMetadata().GetName()
	for _, e := range cfg.GetEnvs() {
		c.Env[e.Key] = string(e.Value)
	}
	for _, m := range cfg.GetMounts() {
		c.Mounts = append(c.Mounts, Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.Readonly})
	}
	for _, d := range cfg.GetDevices() {
		c.Devices = append(c.Devices, d.HostPath)
	}
	for _, d := range cfg.GetCDIDevices() {
		c.CDIDevices = append(c.CDIDevices, d.Name)
	}
	line, err := json.Marshal(c)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	_, err = r.out.Write(append(line, '\n'))
	return err
}

func main() {
	socket := flag.String("socket", "", "unix socket to serve CRI on")
	record := flag.String("record", "", "file to append the CreateContainer requests to, one JSON object a line")
	flag.Parse()
	if err := run(*socket, *record); err != nil {
		fmt.Fprintln(os.Stderr, "faas-cri:", err)
		os.Exit(1)
	}
}

func run(socket, record string) error {
	if socket == "" || record == "" {
		return errors.New("-socket and -record are required")
	}
	out, err := os.OpenFile(record, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	f := fake.NewFakeRemoteRuntime()
	// What fake.RemoteRuntime.Start sets, since we serve it ourselves.
	f.RuntimeService.FakeStatus = &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true},
		{Type: runtimeapi.NetworkReady, Status: true},
	}}
	// The kubelet refuses to start a container whose image reports no
	// size, and the fake's images have the size set here.
	f.ImageService.SetFakeImageSize(1 << 20)
	srv := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(srv, &runtime{RemoteRuntime: f, out: out, logs: map[string]string{}})
	runtimeapi.RegisterImageServiceServer(srv, f)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-sig
		srv.Stop()
	}()
	fmt.Fprintln(os.Stderr, "faas-cri serving on", socket)
	return srv.Serve(l)
}
