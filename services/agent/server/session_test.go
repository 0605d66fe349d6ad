package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

var finishOnly = []isa.Insn{{Op: isa.OpFinish, JobID: 1}}

// roundTrip exercises one device: buffers of several sizes written and
// read back, a program run as jobs.
func roundTrip(t *testing.T, d *faas.Device) {
	t.Helper()
	ctx := context.Background()
	for _, size := range []int64{64, 1000, 4096, 5 << 20} {
		b, err := d.Alloc(ctx, size)
		if err != nil {
			t.Fatalf("alloc %d: %v", size, err)
		}
		if b.Size() < size {
			t.Fatalf("buffer %d: size %d addr %#x", size, b.Size(), b.Addr())
		}
		want := make([]byte, size)
		rand.NewChaCha8([32]byte{byte(size)}).Read(want)
		if err := b.Write(ctx, want, 0); err != nil {
			t.Fatalf("write %d: %v", size, err)
		}
		got := make([]byte, size)
		if err := b.Read(ctx, got, 0); err != nil {
			t.Fatalf("read %d: %v", size, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("buffer of %d bytes read back differs", size)
		}
		if err := b.Free(ctx); err != nil {
			t.Fatalf("free: %v", err)
		}
	}
	p, err := d.Program(ctx, finishOnly)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]bool{}
	for range 100 {
		j, err := d.Queue().Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		st, err := j.Wait(ctx)
		if err != nil {
			t.Fatalf("job %d: %v", j.ID(), err)
		}
		if st.Insns != 1 || seen[j.ID()] {
			t.Fatalf("job %d: stats %+v, seen before %v", j.ID(), st, seen[j.ID()])
		}
		seen[j.ID()] = true
	}
}

func TestSessionLocal(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	d := openDevice(t, a.socket, "alice", 0)
	if !d.Local() || d.Tenant() != "alice" {
		t.Fatalf("local %v tenant %q", d.Local(), d.Tenant())
	}
	roundTrip(t, d)
}

func TestSessionRemote(t *testing.T) {
	a := startSessAgent(t, sessOptions{tls: true, sharedWith: map[int][]string{1: {"bob"}}})
	tc := faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})
	d := openDevice(t, "https://"+a.tcp, "alice", 0, tc)
	if d.Local() {
		t.Fatal("a TLS session claims shared memory")
	}
	roundTrip(t, d)

	// Bob may use slot 1, shared with him, but not slot 0.
	ctx := context.Background()
	c, err := faas.Dial(ctx, "https://"+a.tcp, tc, faas.WithToken(tenantToken("bob")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Open(ctx, 0); !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("bob opening alice's slot 0 = %v, want ErrPermission", err)
	}
	bd, err := c.Open(ctx, 1)
	if err != nil {
		t.Fatalf("bob opening shared slot 1: %v", err)
	}
	defer bd.Close()
	// No token, no session.
	anon, err := faas.Dial(ctx, "https://"+a.tcp, tc)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, err := anon.Open(ctx, 0); !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("anonymous session over TCP = %v, want ErrPermission", err)
	}
}

func TestSessionEngineError(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	d := openDevice(t, a.socket, "alice", 0)
	ctx := context.Background()
	// A program not ending with FINISH is refused by the checker.
	if _, err := d.Program(ctx, []isa.Insn{{Op: isa.OpNop}}); !errors.Is(err, faas.ErrRefused) {
		t.Fatalf("program without FINISH = %v, want ErrRefused", err)
	}
	_ = alidnn.ErrEngine
}
