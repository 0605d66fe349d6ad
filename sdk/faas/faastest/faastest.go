// Package faastest is a fake node agent for tests of programs built on the
// SDK: it serves the sdk/agentapi contract on a real unix socket, with
// scripted loads and injectable errors. Tests of faasd itself run the real
// agent.
package faastest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// Agent serves enough of the agentapi contract for client tests, on a
// real unix socket.
type Agent struct {
	Socket string

	mu       sync.Mutex
	slots    []agentapi.Slot
	images   agentapi.ImageList
	loads    map[string]*fakeLoad
	nextID   int
	auth     []string // Authorization header of every /v1 request
	failWith *agentapi.Error
	status   int // of failWith

	// script returns the events (the final one with Load set, or none to
	// cut the stream) of a new load or pull.
	script func(kind string, image string, slot *int) []agentapi.Event
	// hold, when set, blocks every event stream after its first event
	// until the request's context ends.
	hold bool
}

type fakeLoad struct {
	load   agentapi.Load
	events []agentapi.Event
}

// fakeLoaded is when the fake's slot 0 and cached image were loaded, and
// when its loads start.
var fakeLoaded = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func New(t testing.TB) *Agent {
	t.Helper()
	dir, err := os.MkdirTemp("", "faas")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	a := &Agent{Socket: filepath.Join(dir, "faasd.sock"), loads: map[string]*fakeLoad{}}
	a.slots = []agentapi.Slot{
		{Index: 0, Board: "0000:3b:00.0", BoardModel: "faas-u2", Serial: "S100", Chip: 0, Part: "xcvu9p", State: agentapi.Loaded,
			Image:  &agentapi.Image{Ref: "registry.example/acme/aes:1.2", Digest: "sha256:" + fmt.Sprintf("%064x", 1), Name: "aes", Version: "1.2", Vendor: "acme"},
			Role:   &agentapi.Role{ID: 0xae5, Version: "1.2", Name: "aes"},
			Tenant: "alice", LoadedAt: fakeLoaded},
		{Index: 1, Board: "0000:3b:00.0", BoardModel: "faas-u2", Serial: "S100", Chip: 1, Part: "xcvu9p", State: agentapi.Cleared},
	}
	a.images = agentapi.ImageList{Images: []agentapi.CachedBlob{{Digest: "sha256:" + fmt.Sprintf("%064x", 2), Size: 48 << 20, LastUsed: fakeLoaded}},
		UsedBytes: 48 << 20, MaxBytes: 10 << 30}
	a.script = succeed

	ln, err := net.Listen("unix", a.Socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: a.routes()}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return a
}

// succeed is the default script: every phase of a load or pull, with pull
// progress, then the load done, on slot 1 unless the request names one.
func succeed(kind, image string, slot *int) []agentapi.Event {
	phases := []string{agentapi.PhaseResolve, agentapi.PhasePull, agentapi.PhaseVerify, agentapi.PhaseKey, agentapi.PhaseProgram, agentapi.PhaseSelfTest}
	if kind == "pull" {
		phases = []string{agentapi.PhasePull, agentapi.PhaseVerify}
	}
	var evs []agentapi.Event
	var times []agentapi.PhaseTime
	for _, p := range phases {
		evs = append(evs, agentapi.Event{Phase: p})
		if p == agentapi.PhasePull {
			evs = append(evs, agentapi.Event{Phase: p, Bytes: 1 << 20, Total: 2 << 20}, agentapi.Event{Phase: p, Bytes: 2 << 20, Total: 2 << 20})
		}
		times = append(times, agentapi.PhaseTime{Name: p, DurationMS: 12.5})
	}
	l := agentapi.Load{Kind: kind, Image: agentapi.Image{Ref: image, Digest: "sha256:" + fmt.Sprintf("%064x", 3)},
		Tenant: "alice", State: agentapi.LoadDone, Phases: times, Started: fakeLoaded, Finished: fakeLoaded.Add(2 * time.Second)}
	if kind == "load" {
		l.Slots = []int{1}
		if slot != nil {
			l.Slots = []int{*slot}
		}
	}
	return append(evs, agentapi.Event{Load: &l})
}

// routes is the agent API the fake serves.
func (a *Agent) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	v1 := func(pattern string, h http.HandlerFunc) { mux.HandleFunc(pattern, a.v1(h)) }
	v1("GET /v1/slots", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		writeBody(w, http.StatusOK, agentapi.SlotList{Slots: a.slots})
	})
	v1("GET /v1/slots/{n}", a.getSlot)
	v1("POST /v1/slots/{n}/clear", a.clearSlot)
	v1("POST /v1/loads", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.LoadRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Image == "" {
			writeBody(w, http.StatusBadRequest, agentapi.ErrorBody{Error: agentapi.Error{Code: agentapi.CodeBadRequest, Message: "want an image"}})
			return
		}
		a.start(w, "load", req.Image, req.Slot)
	})
	v1("POST /v1/pulls", func(w http.ResponseWriter, r *http.Request) {
		var req agentapi.PullRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Image == "" {
			writeBody(w, http.StatusBadRequest, agentapi.ErrorBody{Error: agentapi.Error{Code: agentapi.CodeBadRequest, Message: "want an image"}})
			return
		}
		a.start(w, "pull", req.Image, nil)
	})
	v1("GET /v1/loads/{id}", func(w http.ResponseWriter, r *http.Request) {
		if l := a.load(w, r); l != nil {
			final := l.load
			if n := len(l.events); n > 0 && l.events[n-1].Load != nil {
				final = *l.events[n-1].Load
			}
			writeBody(w, http.StatusOK, final)
		}
	})
	v1("GET /v1/loads/{id}/events", a.streamEvents)
	v1("GET /v1/images", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		writeBody(w, http.StatusOK, a.images)
	})
	return mux
}

// v1 records the request's Authorization header and answers with the
// injected error, if any, instead of h.
func (a *Agent) v1(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.auth = append(a.auth, r.Header.Get("Authorization"))
		fail, status := a.failWith, a.status
		a.mu.Unlock()
		if fail != nil {
			writeBody(w, status, agentapi.ErrorBody{Error: *fail})
			return
		}
		h(w, r)
	}
}

// slot is the request's slot {n}, or nil when it answered not found. The
// caller holds a.mu.
func (a *Agent) slot(w http.ResponseWriter, r *http.Request) *agentapi.Slot {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 0 || n >= len(a.slots) {
		writeBody(w, http.StatusNotFound, agentapi.ErrorBody{Error: agentapi.Error{Code: agentapi.CodeNotFound, Message: fmt.Sprintf("no slot %s", r.PathValue("n")), Hint: "faas status lists the slots"}})
		return nil
	}
	return &a.slots[n]
}

func (a *Agent) getSlot(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.slot(w, r); s != nil {
		c := *s
		c.Sensors = &agentapi.Sensors{TempC: 51.5, PowerW: 23.25, VCCIntV: 0.85, Clock0MHz: 250, Clock1MHz: 500, LinkUp: true, Health: "ok"}
		writeBody(w, http.StatusOK, c)
	}
}

func (a *Agent) clearSlot(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.slot(w, r); s != nil {
		*s = agentapi.Slot{Index: s.Index, Board: s.Board, BoardModel: s.BoardModel, Serial: s.Serial, Chip: s.Chip, Part: s.Part, State: agentapi.Cleared}
		writeBody(w, http.StatusOK, *s)
	}
}

// start begins a load or pull: it runs the script and answers the load,
// still running; its events say how it ends.
func (a *Agent) start(w http.ResponseWriter, kind, image string, slot *int) {
	a.mu.Lock()
	script := a.script
	a.mu.Unlock()
	evs := script(kind, image, slot)
	a.mu.Lock()
	a.nextID++
	id := fmt.Sprintf("%s-%d", kind, a.nextID)
	for _, ev := range evs {
		if ev.Load != nil {
			ev.Load.ID = id
		}
	}
	l := agentapi.Load{ID: id, Kind: kind, Image: agentapi.Image{Ref: image}, Tenant: "alice", State: agentapi.LoadRunning, Started: time.Now()}
	a.loads[id] = &fakeLoad{load: l, events: evs}
	a.mu.Unlock()
	writeBody(w, http.StatusAccepted, l)
}

// load is the request's load {id}, or nil when it answered not found.
func (a *Agent) load(w http.ResponseWriter, r *http.Request) *fakeLoad {
	a.mu.Lock()
	defer a.mu.Unlock()
	l := a.loads[r.PathValue("id")]
	if l == nil {
		writeBody(w, http.StatusNotFound, agentapi.ErrorBody{Error: agentapi.Error{Code: agentapi.CodeNotFound, Message: "no load " + r.PathValue("id")}})
	}
	return l
}

// streamEvents streams a load's events as NDJSON, holding after the first
// if hold is set.
func (a *Agent) streamEvents(w http.ResponseWriter, r *http.Request) {
	l := a.load(w, r)
	if l == nil {
		return
	}
	a.mu.Lock()
	hold := a.hold
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	for k, ev := range l.events {
		enc.Encode(ev)
		w.(http.Flusher).Flush()
		if k == 0 && hold {
			<-r.Context().Done()
			return
		}
	}
}

func writeBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// fail makes every /v1 request answer status with e, or succeed again when
// e is nil.
func (a *Agent) Fail(status int, e *agentapi.Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.failWith, a.status = e, status
}

// failLoads makes loads and pulls end failed with e.
func (a *Agent) FailLoads(e agentapi.Error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ok := a.script
	a.script = func(kind, image string, slot *int) []agentapi.Event {
		evs := ok(kind, image, slot)
		last := evs[len(evs)-1].Load
		last.State, last.Error, last.Slots = agentapi.LoadFailed, &e, nil
		return append(evs[:2:2], agentapi.Event{Load: last})
	}
}

func (a *Agent) AuthHeaders() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.auth...)
}

// SetScript sets what a new load or pull streams: its events, the final one
// with Load set, or none to cut the stream.
func (a *Agent) SetScript(f func(kind, image string, slot *int) []agentapi.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.script = f
}

// SetHold makes every event stream block after its first event until the
// request's context ends.
func (a *Agent) SetHold(hold bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.hold = hold
}
