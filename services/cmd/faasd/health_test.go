package main

import (
	"context"
	"crypto"
	"crypto/ecdh"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/device"
	devsim "github.com/fpga-faas/faas/services/agent/device/sim"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/regclient"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell/sim"
)

// runHealth runs `faasd health --socket socket` as the probe would.
func runHealth(socket string) error {
	cmd := healthCommand()
	cmd.SetArgs([]string{"--socket", socket, "--timeout", "10s"})
	cmd.SetOut(new(nopWriter))
	cmd.SetErr(new(nopWriter))
	return cmd.ExecuteContext(context.Background())
}

type nopWriter struct{}

func (*nopWriter) Write(p []byte) (int, error) { return len(p), nil }

// startAgent serves the agent API of one simulated board on a socket in
// dir until the returned stop is called. Its registry is never reached:
// /healthz does not ask it.
func startAgent(t *testing.T, dir string) (socket string, stop func()) {
	t.Helper()
	roles, err := simRoles()
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sim.NewBoard(sim.Config{Roles: roles, DDRSize: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	b, err := devsim.Open(sb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c, err := cache.Open(filepath.Join(dir, "cache"), cache.Options{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := slots.Open([]*device.Board{b}, filepath.Join(dir, "slots.json"))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := regclient.New("http://127.0.0.1:1", "node1", "faas_unused", nil)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	platform, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	ld, err := loader.New(loader.Config{Slots: table, Cache: c, Registry: reg, NodeKey: nodeKey,
		PlatformKeys: []crypto.PublicKey{platform.Public()}})
	if err != nil {
		t.Fatal(err)
	}
	socket = filepath.Join(dir, "faasd.sock")
	srv, err := server.New(server.Config{Socket: socket, Slots: table, Cache: c, Loader: ld, Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		}
	}
	t.Cleanup(stop)
	for range 500 {
		if _, err := os.Stat(socket); err == nil {
			return socket, stop
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the agent's socket never appeared")
	return "", nil
}

func TestHealth(t *testing.T) {
	// Short: a unix socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "faasd-health-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket, stop := startAgent(t, dir)

	if err := runHealth(socket); err != nil {
		t.Fatalf("serving agent: %v", err)
	}
	stop()
	if err := runHealth(socket); !errors.Is(err, errCheck) {
		t.Errorf("stopped agent: got %v, want errCheck (exit 1)", err)
	}

	// A socket file left behind by an agent that died: nobody accepts.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if err := runHealth(stale); !errors.Is(err, errCheck) {
		t.Errorf("stale socket: got %v, want errCheck", err)
	}
	if err := runHealth(filepath.Join(dir, "missing.sock")); !errors.Is(err, errCheck) {
		t.Errorf("no socket: got %v, want errCheck", err)
	}
}
