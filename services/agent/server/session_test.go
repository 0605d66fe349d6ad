package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/sdk/faas"
)

var finishOnly = []isa.Insn{{Op: isa.OpFinish, JobID: 1}}

// roundTrip exercises one device: buffers of several sizes written and
// read back, a program run as jobs.
func roundTrip(t *testing.T, d *faas.Device, sizes ...int64) {
	t.Helper()
	ctx := context.Background()
	for _, size := range append([]int64{64, 1000, 4096, 5 << 20}, sizes...) {
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
	a := startSessAgent(t, sessOptions{ddr: 512 << 20})
	d := openDevice(t, a.socket, "alice", 0)
	if !d.Local() || d.Tenant() != "alice" {
		t.Fatalf("local %v tenant %q", d.Local(), d.Tenant())
	}
	c, err := faas.Dial(context.Background(), a.socket, faas.WithToken(tenantToken("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if sl, err := c.Slot(context.Background(), 0); err != nil || sl.State != agentapi.Busy {
		t.Errorf("slot 0 with a session: %+v %v, want busy", sl.State, err)
	}
	if sl, err := c.Slot(context.Background(), 1); err != nil || sl.State != agentapi.Loaded {
		t.Errorf("slot 1 without a session: %+v %v, want loaded", sl.State, err)
	}
	roundTrip(t, d, 20<<20+64)
	// Bytes and Sync: the shared memory itself.
	ctx := context.Background()
	b, err := d.Alloc(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	host := b.Bytes()
	if len(host) != int(b.Size()) {
		t.Fatalf("Bytes of %d for a %d-byte buffer", len(host), b.Size())
	}
	for i := range host {
		host[i] = byte(i * 7)
	}
	if err := b.Sync(ctx, faas.ToDevice, 0, b.Size()); err != nil {
		t.Fatal(err)
	}
	clear(host)
	if err := b.Sync(ctx, faas.FromDevice, 4096, 4096); err != nil {
		t.Fatal(err)
	}
	if want := byte((4096 + 5) * 7 % 256); host[4096+5] != want || host[5] != 0 {
		t.Fatalf("Sync moved the wrong bytes: %d %d", host[4096+5], host[5])
	}
	if err := b.Sync(ctx, faas.FromDevice, b.Size()-64, 128); !errors.Is(err, faas.ErrOutOfRange) {
		t.Errorf("sync past the end: %v", err)
	}
}

func TestSessionRemote(t *testing.T) {
	a := startSessAgent(t, sessOptions{tls: true, sharedWith: map[int][]string{1: {"bob"}}, ddr: 512 << 20})
	tc := faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})
	d := openDevice(t, "https://"+a.tcp, "alice", 0, tc)
	if d.Local() {
		t.Fatal("a TLS session claims shared memory")
	}
	roundTrip(t, d, 20<<20+64) // more than one frame's worth

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
	// A program waiting for a token nobody sends passes the check and
	// stops the engine: the job's error is the engine's, with its cause.
	p, err := d.Program(ctx, asm(t, "nop.compute ; pop_prev\nfinish job=1"))
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.Queue().Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var ee *alidnn.EngineError
	if _, err := j.Wait(ctx); !errors.As(err, &ee) || ee.Cause != alidnn.CauseDeadlock || !errors.Is(err, alidnn.ErrEngine) {
		t.Fatalf("deadlocking job: %v, want an engine error (deadlock)", err)
	}
	// The session goes on.
	ok, err := d.Program(ctx, finishOnly)
	if err != nil {
		t.Fatal(err)
	}
	if j, err = d.Queue().Submit(ctx, ok); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(ctx); err != nil {
		t.Fatalf("job after an engine error: %v", err)
	}
}

// TestSessionEndsWithClear: clearing a slot ends its sessions before the
// chip is wiped; the slot then refuses new ones.
func TestSessionEndsWithClear(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()
	d := openDevice(t, a.socket, "alice", 0)
	if _, err := d.Alloc(ctx, 4096); err != nil {
		t.Fatal(err)
	}
	c, err := faas.Dial(ctx, a.socket, faas.WithToken(tenantToken("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Clear(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Alloc(ctx, 4096); !errors.Is(err, faas.ErrClosed) {
		t.Errorf("alloc after the slot was cleared: %v, want ErrClosed", err)
	}
	if _, err := c.Open(ctx, 0); !errors.Is(err, faas.ErrBusy) {
		t.Errorf("session on a cleared slot: %v, want ErrBusy", err)
	}
	if u := a.srv.SessionUsage(0); u != nil {
		t.Errorf("the cleared slot's engine still reports %+v", u)
	}
}

// TestSessionProtocolViolation: a client sending garbage loses its
// connection, and its session (memory included) ends with it.
func TestSessionProtocolViolation(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	r := dialRaw(t, a.socket, "mallory", 0)
	if _, err := r.alloc(1 << 20); err != nil {
		t.Fatal(err)
	}
	if u := usageOf(a.srv, 0, "mallory"); u.Memory < 1<<20 {
		t.Fatalf("usage %+v", u)
	}
	r.conn.Write([]byte("GET / HTTP/1.1\r\n\r\n...."))
	if _, err := session.ReadFrame(r.br, session.MaxPayload); err == nil {
		t.Fatal("the agent answered garbage")
	}
	deadline := time.Now().Add(10 * time.Second)
	for u := usageOf(a.srv, 0, "mallory"); u.Memory != 0 || u.Sessions != 0; u = usageOf(a.srv, 0, "mallory") {
		if time.Now().After(deadline) {
			t.Fatalf("session outlived its connection: %+v", u)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSessionCorruptRing: a client that writes an impossible index into
// the shared control block loses its connection and its session; the agent
// does not trust the mapping.
func TestSessionCorruptRing(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	uc, br, mem := rawShm(t, a.socket, "mallory", 0)
	alloc := session.Frame{Op: session.OpAlloc, ID: 2, Payload: session.U64s(1 << 20)}
	if _, err := uc.Write(alloc.Marshal()); err != nil {
		t.Fatal(err)
	}
	if f, err := session.ReadFrame(br, session.MaxPayload); err != nil || f.Op != session.OpReply {
		t.Fatalf("alloc: %+v %v", f, err)
	}
	if u := usageOf(a.srv, 0, "mallory"); u.Memory < 1<<20 {
		t.Fatalf("usage %+v", u)
	}
	// The submission ring's tail (offset 128 of the control block, see
	// sdk/agentapi/session) far beyond its head, then a doorbell.
	binary.LittleEndian.PutUint64(mem[128:], 1<<40)
	uc.Write((&session.Frame{Op: session.OpDoorbell}).Marshal())
	deadline := time.Now().Add(10 * time.Second)
	for u := usageOf(a.srv, 0, "mallory"); u.Memory != 0 || u.Sessions != 0; u = usageOf(a.srv, 0, "mallory") {
		if time.Now().After(deadline) {
			t.Fatalf("session with a corrupt ring lives on: %+v", u)
		}
		time.Sleep(10 * time.Millisecond)
	}
	uc.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := session.ReadFrame(br, session.MaxPayload)
		if err != nil {
			break // the agent hung up
		}
		if f.Op != session.OpDoorbell && f.Op != session.OpReply {
			t.Fatalf("unexpected %v", f.Op)
		}
	}
}

// TestSessionSurvivesOthersLoad: another tenant's load aimed at the slot
// (which the loader refuses) leaves the sessions on it alone.
func TestSessionSurvivesOthersLoad(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()
	d := openDevice(t, a.socket, "alice", 0)
	c, err := faas.Dial(ctx, a.socket, faas.WithToken(tenantToken("bob")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Load(ctx, "127.0.0.1:1/acme/alidnn:1", faas.OnSlot(0)); err == nil {
		t.Fatal("bob's load onto alice's slot succeeded")
	}
	if _, err := d.Alloc(ctx, 4096); err != nil {
		t.Fatalf("alice's session after bob's load attempt: %v", err)
	}
}

// TestSessionCancelAndTimeout: Job.Cancel of a queued and of a running job,
// and the agent's job time limit, on the local path (where the cancelled
// job may still be on the submission ring) and over TLS.
func TestSessionCancelAndTimeout(t *testing.T) {
	const limit = 300 * time.Millisecond
	a := startSessAgent(t, sessOptions{tls: true, jobTimeout: limit})
	for _, remote := range []bool{false, true} {
		name := map[bool]string{false: "local", true: "tls"}[remote]
		t.Run(name, func(t *testing.T) {
			d := openDevice(t, a.socket, "alice", 0)
			if remote {
				d = openDevice(t, "https://"+a.tcp, "alice", 0, faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13}))
			}
			ctx := context.Background()
			endless, err := d.Program(ctx, asm(t, "gemm uop=0:1 iter=16383,16383 dst=0,0 src=0,0 wgt=0,0\nfinish job=1"))
			if err != nil {
				t.Fatal(err)
			}
			fin, err := d.Program(ctx, finishOnly)
			if err != nil {
				t.Fatal(err)
			}
			submit := func(p *faas.Program) *faas.Job {
				t.Helper()
				j, err := d.Queue().Submit(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				return j
			}
			running, queued, last := submit(endless), submit(fin), submit(fin)
			if err := queued.Cancel(ctx); err != nil {
				t.Fatalf("Cancel of a queued job: %v", err)
			}
			if _, err := queued.Wait(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled queued job: %v, want context.Canceled", err)
			}
			if err := running.Cancel(ctx); err != nil {
				t.Fatalf("Cancel of the running job: %v", err)
			}
			if _, err := running.Wait(ctx); !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled running job: %v, want context.Canceled", err)
			}
			if _, err := last.Wait(ctx); err != nil {
				t.Fatalf("the job behind the cancelled ones: %v", err)
			}
			if err := last.Cancel(ctx); err != nil {
				t.Errorf("Cancel of a finished job: %v", err)
			}
			start := time.Now()
			if _, err := submit(endless).Wait(ctx); !errors.Is(err, faas.ErrJobTimeout) {
				t.Fatalf("endless job: %v, want ErrJobTimeout", err)
			}
			if took := time.Since(start); took < limit {
				t.Errorf("timed out after %v, before the %v limit", took, limit)
			}
			if _, err := submit(fin).Wait(ctx); err != nil {
				t.Fatalf("a job after the timeout: %v", err)
			}
		})
	}
}

// TestSessionProgramFree: a session's program area (1 MiB) holds one
// program of 40,000 instructions but not two; freeing the first makes room,
// and a program freed twice is refused.
func TestSessionProgramFree(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	d := openDevice(t, a.socket, "alice", 0)
	ctx := context.Background()
	insns := make([]isa.Insn, 40000)
	for k := range insns {
		insns[k] = isa.Insn{Op: isa.OpNop}
	}
	insns[len(insns)-1] = isa.Insn{Op: isa.OpFinish, JobID: 1}
	p, err := d.Program(ctx, insns)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Program(ctx, insns); !errors.Is(err, faas.ErrQuota) {
		t.Fatalf("a second program of 640,000 bytes in the 1 MiB area: %v, want ErrQuota", err)
	}
	if err := p.Free(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Program(ctx, insns); err != nil {
		t.Fatalf("the same program after the first was freed: %v", err)
	}
	if err := p.Free(ctx); !errors.Is(err, faas.ErrBadHandle) {
		t.Errorf("a program freed twice: %v, want ErrBadHandle", err)
	}
}
