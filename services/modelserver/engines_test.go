package modelserver

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	bitsalidnn "github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// errPulled is what a pulled board's calls return: what the SDK returns
// when faasd's session breaks.
var errPulled = fmt.Errorf("board pulled: %w", faas.ErrUnavailable)

// board is a simulated board that can be pulled: from then on its calls
// fail as a dead faasd's do, and jobs held on it end with that error.
type board struct {
	alidnn.Engine
	dead chan struct{}
	hold chan struct{} // if not nil, jobs wait for it to close
}

func (b *board) pull() { close(b.dead) }

func (b *board) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	c, err := b.Engine.Program(ctx, insns)
	return boardCode{c, b}, err
}

type boardCode struct {
	alidnn.Code
	b *board
}

func (c boardCode) Submit(ctx context.Context) (alidnn.Job, error) {
	select {
	case <-c.b.dead:
		return nil, errPulled
	default:
	}
	j, err := c.Code.Submit(ctx)
	return boardJob{j, c.b}, err
}

type boardJob struct {
	alidnn.Job
	b *board
}

func (j boardJob) Wait(ctx context.Context) (bitsalidnn.Stats, error) {
	if j.b.hold != nil {
		select {
		case <-j.b.hold:
		case <-j.b.dead:
		}
	}
	st, err := j.Job.Wait(ctx)
	select {
	case <-j.b.dead:
		return bitsalidnn.Stats{}, errPulled
	default:
	}
	return st, err
}

// boardOpener opens a new simulated board each time; from the second
// open on, it waits for gate (if not nil) first.
type boardOpener struct {
	t      testing.TB
	gate   chan struct{}
	hold   chan struct{}
	mu     sync.Mutex
	boards []*board
	opens  atomic.Int32
}

func (o *boardOpener) String() string { return "a simulated board" }

func (o *boardOpener) OpenEngine(ctx context.Context) (*OpenedEngine, error) {
	if n := o.opens.Add(1); n > 1 && o.gate != nil {
		select {
		case <-o.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	b := &board{Engine: simEngine(o.t), dead: make(chan struct{}), hold: o.hold}
	o.mu.Lock()
	o.boards = append(o.boards, b)
	o.mu.Unlock()
	return &OpenedEngine{Engine: b, Done: b.dead, Where: "a simulated board", Close: func() {}}, nil
}

func (o *boardOpener) last() *board {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.boards[len(o.boards)-1]
}

// gauge is the value of an unlabelled metric.
func gauge(t testing.TB, s *served, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// TestEngineLost pulls the board of the only engine while requests run
// on it: they fail with 503 (REST, with Retry-After) and Unavailable
// (gRPC), the server and the model are not ready, new requests fail the
// same way; once the opener gives a new board, the model is loaded on it
// and everything succeeds again.
func TestEngineLost(t *testing.T) {
	hold, gate := make(chan struct{}), make(chan struct{})
	op := &boardOpener{t: t, gate: gate, hold: hold}
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{Openers: []EngineOpener{op}})
	c := mnistCases(t)[0]
	if got := gauge(t, s.served, "modelserver_engines_up"); got != 1 {
		t.Errorf("engines up: %v, want 1", got)
	}
	in := s.models["mnist"].versions[0].live()[0]
	rest, rpc := make(chan int, 1), make(chan error, 1)
	go func() {
		code, h, _ := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", c.Input, nil), nil)
		if h.Get("Retry-After") == "" {
			code = -code
		}
		rest <- code
	}()
	go func() {
		_, err := s.client.ModelInfer(context.Background(), typedInfer(t, "", c.Input))
		rpc <- err
	}()
	waitFor(t, "two requests on the engine", func() bool { return in.pending.Load() == 2 })
	op.last().pull()
	if code := <-rest; code != http.StatusServiceUnavailable {
		t.Errorf("REST request in flight: %d, want 503 with Retry-After", code)
	}
	if err := <-rpc; status.Code(err) != codes.Unavailable {
		t.Errorf("gRPC request in flight: %v, want Unavailable", err)
	}
	waitFor(t, "the engine dropped", func() bool { return !s.Ready() })
	for _, path := range []string{"/v2/health/ready", "/v2/models/mnist/ready"} {
		if resp, err := http.Get(s.URL + path); err != nil || resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("GET %s with no engine: %v %v, want 503", path, resp.Status, err)
		} else {
			resp.Body.Close()
		}
	}
	if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", c.Input, nil), nil); code != http.StatusServiceUnavailable {
		t.Errorf("a request with no engine: %d %s, want 503", code, b)
	}
	if _, err := s.client.ModelInfer(context.Background(), typedInfer(t, "", c.Input)); status.Code(err) != codes.Unavailable {
		t.Errorf("a gRPC request with no engine: %v, want Unavailable", err)
	}
	if r, err := s.client.ModelReady(context.Background(), &inferencepb.ModelReadyRequest{Name: "mnist"}); err != nil || r.GetReady() {
		t.Errorf("ModelReady with no engine: %v %v, want false", r, err)
	}
	close(hold)
	close(gate)
	waitFor(t, "the engine opened again", s.Ready)
	if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", c.Input, nil), nil); code != http.StatusOK {
		t.Errorf("a request after the engine came back: %d %s", code, b)
	}
	if _, err := s.client.ModelInfer(context.Background(), typedInfer(t, "", c.Input)); err != nil {
		t.Errorf("a gRPC request after the engine came back: %v", err)
	}
	for name, want := range map[string]float64{"modelserver_engines_up": 1, "modelserver_engine_reopens_total": 1} {
		if got := gauge(t, s.served, name); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if got := countedBy(t, s.served, "http", "503") + countedBy(t, s.served, "grpc", "503"); got != 4 {
		t.Errorf("%v requests counted 503, want 4", got)
	}
	if got := gauge(t, s.served, "modelserver_device_seconds_total"); got <= 0 {
		t.Errorf("device time %v, want some", got)
	}
}

// TestEngineLostOthersServe pulls one of two boards: requests go on to the
// other, readiness stays, and the pulled one comes back.
func TestEngineLostOthersServe(t *testing.T) {
	a, b := &boardOpener{t: t}, &boardOpener{t: t, gate: make(chan struct{})}
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Openers: []EngineOpener{a, b}})
	b.last().pull()
	waitFor(t, "the pulled engine dropped", func() bool { return len(s.models["mnist"].versions[0].live()) == 1 })
	if !s.Ready() {
		t.Error("not ready with one engine of two up")
	}
	c := mnistCases(t)[1]
	for k := range 4 {
		if code, _, body := post(t, s.URL+"/v2/models/mnist/infer", jsonInfer(t, "", c.Input, nil), nil); code != http.StatusOK {
			t.Errorf("request %d on the engine left: %d %s", k, code, body)
		}
	}
	close(b.gate)
	waitFor(t, "the engine opened again", func() bool { return len(s.models["mnist"].versions[0].live()) == 2 })
}

// failingOpener opens a board the first time and fails every time after.
type failingOpener struct {
	boardOpener
}

func (o *failingOpener) OpenEngine(ctx context.Context) (*OpenedEngine, error) {
	if o.opens.Load() > 0 {
		o.opens.Add(1)
		return nil, fmt.Errorf("no board: %w", faas.ErrNoCapacity)
	}
	return o.boardOpener.OpenEngine(ctx)
}

// TestEngineGivenUp: an engine that cannot be opened again after
// ReopenAttempts makes the server not live, over REST and gRPC, and
// closes Dead.
func TestEngineGivenUp(t *testing.T) {
	op := &failingOpener{boardOpener{t: t}}
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{Openers: []EngineOpener{op}, ReopenAttempts: 2})
	if !s.Live() {
		t.Fatal("not live at the start")
	}
	op.last().pull()
	select {
	case <-s.Dead():
	case <-time.After(time.Minute):
		t.Fatal("the server did not give up in a minute")
	}
	if n := op.opens.Load(); n != 3 {
		t.Errorf("%d opens, want the first and 2 attempts", n)
	}
	resp, err := http.Get(s.URL + "/v2/health/live")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("GET /v2/health/live after giving up: %d, want 503", resp.StatusCode)
	}
	if r, err := s.client.ServerLive(context.Background(), &inferencepb.ServerLiveRequest{}); err != nil || r.GetLive() {
		t.Errorf("ServerLive after giving up: %v %v, want false", r, err)
	}
}
