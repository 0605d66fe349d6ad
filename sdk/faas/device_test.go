package faas_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/sdk/faas"
)

// frameAgent is a scripted agent speaking the session protocol on frames
// (it declines shared memory): each request frame goes to answer, which
// returns the frames to send back. The real agent's tests are in
// services/agent/server; these pin the SDK's side of the contract.
type frameAgent struct {
	socket string
	mu     sync.Mutex
	answer func(f session.Frame) []session.Frame
	conns  []net.Conn
	closes int
}

func startFrameAgent(t *testing.T, answer func(f session.Frame) []session.Frame) *frameAgent {
	t.Helper()
	dir, err := os.MkdirTemp("", "faas-session")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &frameAgent{socket: filepath.Join(dir, "faasd.sock"), answer: answer}
	ln, err := net.Listen("unix", a.socket)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {})
	mux.HandleFunc("POST /v1/slots/{n}/session", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("n") != "0" {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":{"code":"permission_denied","message":"not yours"}}`))
			return
		}
		conn, brw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		a.mu.Lock()
		a.conns = append(a.conns, conn)
		a.mu.Unlock()
		conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + session.Protocol + "\r\n\r\n"))
		defer conn.Close()
		for {
			f, err := session.ReadFrame(brw.Reader, session.MaxPayload)
			if err != nil {
				return
			}
			var out []session.Frame
			switch f.Op {
			case session.OpHello:
				out = []session.Frame{{Op: session.OpReply, ID: f.ID, Payload: session.Setup{Entries: 4, Tenant: "alice"}.Marshal()}}
			case session.OpClose:
				a.mu.Lock()
				a.closes++
				a.mu.Unlock()
				out = []session.Frame{{Op: session.OpReply, ID: f.ID}}
			default:
				out = a.answer(f)
			}
			for _, o := range out {
				if _, err := conn.Write(o.Marshal()); err != nil {
					return
				}
			}
		}
	})
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

func (a *frameAgent) cut() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.conns {
		c.Close()
	}
}

func openFake(t *testing.T, a *frameAgent) *faas.Device {
	t.Helper()
	c, err := faas.Dial(context.Background(), a.socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	d, err := c.Open(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func errFrame(id uint64, code agentapi.Code) session.Frame {
	return session.Frame{Op: session.OpError, ID: id, Payload: session.ErrorPayload{Code: code, Message: string(code)}.Marshal()}
}

// memAgent keeps one buffer's bytes in memory and completes jobs as told.
func memAgent(t *testing.T, complete func(job uint64) []session.Frame) *frameAgent {
	var mem [32 << 20]byte
	return startFrameAgent(t, func(f session.Frame) []session.Frame {
		reply := func(p []byte) []session.Frame { return []session.Frame{{Op: session.OpReply, ID: f.ID, Payload: p}} }
		switch f.Op {
		case session.OpAlloc:
			v, _, _ := session.ParseU64s(f.Payload, 1, false)
			if v[0] > uint64(len(mem)) {
				return []session.Frame{errFrame(f.ID, agentapi.CodeQuota)}
			}
			return reply(session.AllocReply{Handle: 7, Addr: 0x1000, Size: (v[0] + 63) &^ 63}.Marshal())
		case session.OpWrite:
			v, data, _ := session.ParseU64s(f.Payload, 2, true)
			if v[0] != 7 {
				return []session.Frame{errFrame(f.ID, agentapi.CodeBadHandle)}
			}
			copy(mem[v[1]:], data)
			return reply(nil)
		case session.OpRead:
			v, _, _ := session.ParseU64s(f.Payload, 3, false)
			return reply(bytes.Clone(mem[v[1] : v[1]+v[2]]))
		case session.OpFree:
			return reply(nil)
		case session.OpProgram:
			insns, err := session.DecodeProgram(f.Payload)
			if err != nil || insns[len(insns)-1].Op != isa.OpFinish {
				return []session.Frame{errFrame(f.ID, agentapi.CodeRefused)}
			}
			return reply(session.U64s(3))
		case session.OpSubmit:
			e, _ := session.ParseSubmit(f.Payload)
			return complete(e.Job)
		}
		return []session.Frame{errFrame(f.ID, agentapi.CodeBadRequest)}
	})
}

func completion(c session.Completion) []session.Frame {
	return []session.Frame{{Op: session.OpCompletion, Payload: c.Marshal()}}
}

func TestDeviceFramesPath(t *testing.T) {
	a := memAgent(t, func(job uint64) []session.Frame {
		switch job {
		case 2:
			return completion(session.Completion{Job: job, Kind: session.EngineFault, Cause: alidnn.CauseWindow, PC: 4})
		case 3:
			return completion(session.Completion{Job: job, Kind: session.Failed, Code: agentapi.CodeSessionClosed})
		case 1:
		default:
			return nil // never completes
		}
		return completion(session.Completion{Job: job, Stats: alidnn.Stats{Insns: 1, JobID: 9}})
	})
	d := openFake(t, a)
	ctx := context.Background()
	if d.Local() || d.Tenant() != "alice" {
		t.Fatalf("local %v tenant %q", d.Local(), d.Tenant())
	}
	// A write larger than one frame is split, and reads back.
	b, err := d.Alloc(ctx, 20<<20)
	if err != nil {
		t.Fatal(err)
	}
	if b.Bytes() != nil {
		t.Error("Bytes on the frames path")
	}
	if err := b.Sync(ctx, faas.ToDevice, 0, 64); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Sync on the frames path: %v", err)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), (20<<20)/16)
	if err := b.Write(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if err := b.Read(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back: %v", err)
	}
	if err := b.Write(ctx, make([]byte, 128), b.Size()-64); !errors.Is(err, faas.ErrOutOfRange) {
		t.Errorf("write past the end: %v", err)
	}
	if _, err := d.Alloc(ctx, 64<<20); !errors.Is(err, faas.ErrQuota) {
		t.Errorf("alloc over quota: %v", err)
	}
	if _, err := d.Program(ctx, []isa.Insn{{Op: isa.OpNop}}); !errors.Is(err, faas.ErrRefused) {
		t.Errorf("refused program: %v", err)
	}
	p, err := d.Program(ctx, []isa.Insn{{Op: isa.OpFinish, JobID: 9}})
	if err != nil {
		t.Fatal(err)
	}
	q := d.Queue()
	var jobs []*faas.Job
	for range 4 {
		j, err := q.Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	if st, err := jobs[0].Wait(ctx); err != nil || st.JobID != 9 || jobs[0].ID() != 1 {
		t.Errorf("job 1: %+v %v", st, err)
	}
	var ee *alidnn.EngineError
	if _, err := jobs[1].Wait(ctx); !errors.As(err, &ee) || ee.Cause != alidnn.CauseWindow || !errors.Is(err, alidnn.ErrEngine) {
		t.Errorf("job 2: %v", err)
	}
	if _, err := jobs[2].Wait(ctx); !errors.Is(err, faas.ErrClosed) {
		t.Errorf("job 3: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := jobs[3].Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("job 4 with a deadline: %v", err)
	}
	// The rings hold 4 jobs; with job 4 in flight, 3 more fit, the fourth
	// waits for room until its context ends.
	for range 3 {
		if _, err := q.Submit(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel2 := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel2()
	if _, err := q.Submit(sctx, p); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("submit beyond the ring: %v", err)
	}
	// The agent goes away: the job in flight and later calls fail.
	a.cut()
	if _, err := jobs[3].Wait(ctx); !errors.Is(err, faas.ErrClosed) || !errors.Is(err, faas.ErrUnavailable) {
		t.Errorf("job in flight when the agent went away: %v", err)
	}
	if _, err := d.Alloc(ctx, 64); !errors.Is(err, faas.ErrClosed) {
		t.Errorf("alloc after the agent went away: %v", err)
	}
}

func TestDeviceOpenRefused(t *testing.T) {
	a := memAgent(t, nil)
	c, err := faas.Dial(context.Background(), a.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Open(context.Background(), 1); !errors.Is(err, faas.ErrPermission) {
		t.Fatalf("open of another's slot: %v", err)
	}
}

func TestDeviceClose(t *testing.T) {
	a := memAgent(t, func(uint64) []session.Frame { return nil })
	d := openFake(t, a)
	ctx := context.Background()
	p, err := d.Program(ctx, []isa.Insn{{Op: isa.OpFinish}})
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.Queue().Submit(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Wait(ctx); !errors.Is(err, faas.ErrClosed) {
		t.Errorf("job after Close: %v", err)
	}
	if _, err := d.Alloc(ctx, 64); !errors.Is(err, faas.ErrClosed) {
		t.Errorf("alloc after Close: %v", err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closes != 1 {
		t.Errorf("the agent saw %d closes", a.closes)
	}
}

// TestDeviceAbandonedAlloc: an allocation whose caller gave up is freed
// when its reply comes after all.
func TestDeviceAbandonedAlloc(t *testing.T) {
	freed := make(chan uint64, 1)
	a := startFrameAgent(t, func(f session.Frame) []session.Frame {
		switch f.Op {
		case session.OpAlloc:
			time.Sleep(50 * time.Millisecond)
			return []session.Frame{{Op: session.OpReply, ID: f.ID, Payload: session.AllocReply{Handle: 99, Addr: 0, Size: 64}.Marshal()}}
		case session.OpFree:
			v, _, _ := session.ParseU64s(f.Payload, 1, false)
			freed <- v[0]
			return []session.Frame{{Op: session.OpReply, ID: f.ID}}
		}
		return nil
	})
	d := openFake(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	if _, err := d.Alloc(ctx, 64); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("alloc: %v", err)
	}
	select {
	case h := <-freed:
		if h != 99 {
			t.Errorf("freed handle %d, want 99", h)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the abandoned buffer was not freed")
	}
}
