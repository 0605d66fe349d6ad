package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/loader"
)

// loadTable keeps the recent loads and their events in memory, for
// GET /v1/loads/{id} and its event stream.
type loadTable struct {
	mu    sync.Mutex
	max   int
	order []string
	byID  map[string]*loadRun
}

// loadRun is one load with its events. changed is closed and replaced at
// every change, which wakes every follower.
type loadRun struct {
	mu      sync.Mutex
	load    agentapi.Load
	events  []agentapi.Event
	changed chan struct{}
}

func newLoadTable(max int) *loadTable {
	return &loadTable{max: max, byID: map[string]*loadRun{}}
}

func (t *loadTable) add(l agentapi.Load) *loadRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	run := &loadRun{load: l, changed: make(chan struct{})}
	t.byID[l.ID] = run
	t.order = append(t.order, l.ID)
	// Forget the oldest finished loads beyond max.
	for len(t.order) > t.max {
		old := t.byID[t.order[0]]
		if old.snapshot().State == agentapi.LoadRunning {
			break
		}
		delete(t.byID, t.order[0])
		t.order = t.order[1:]
	}
	return run
}

func (t *loadTable) get(id string) *loadRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byID[id]
}

func (r *loadRun) snapshot() agentapi.Load {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.load
}

// update changes the load and appends ev, if any.
func (r *loadRun) update(f func(*agentapi.Load), ev *agentapi.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if f != nil {
		f(&r.load)
	}
	if ev != nil && len(r.events) < maxEvents || ev != nil && ev.Load != nil {
		r.events = append(r.events, *ev)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// maxEvents bounds the events kept per load; the loader throttles progress
// well below it, and the final event is always kept.
const maxEvents = 4096

// since returns the events from index i on, whether the load has ended,
// and a channel closed at the next change.
func (r *loadRun) since(i int) ([]agentapi.Event, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i > len(r.events) {
		i = len(r.events)
	}
	return append([]agentapi.Event(nil), r.events[i:]...), r.load.State != agentapi.LoadRunning, r.changed
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (s *Server) startLoad(pull bool) handler {
	return func(w http.ResponseWriter, r *http.Request, p *principal) {
		var req agentapi.LoadRequest
		if pull {
			var pr agentapi.PullRequest
			if err := decode(r, &pr); err != nil {
				badRequest(w, "%v", err)
				return
			}
			req.Image = pr.Image
		} else if err := decode(r, &req); err != nil {
			badRequest(w, "%v", err)
			return
		}
		if req.Image == "" || len(req.Image) > 512 {
			badRequest(w, "image: want a reference of at most 512 bytes")
			return
		}
		run, err := s.beginLoad(p, req, pull)
		var ae *apiError
		switch {
		case errors.As(err, &ae) && ae.e.Code == agentapi.CodeBusy:
			// 503, not busy's 409: the node, not the slot, is busy, and
			// clients retry a load on 503.
			writeWireError(w, http.StatusServiceUnavailable, ae.e)
			return
		case err != nil:
			writeErrorFor(w, err, agentapi.CodeInternal, "")
			return
		}
		writeJSON(w, http.StatusAccepted, run.snapshot())
	}
}

// beginLoad starts loading (or, with pull, only pulling) req.Image as p,
// who must have sent a registry token; the load runs on after the request
// that started it, and its run tells how it ends.
func (s *Server) beginLoad(p *principal, req agentapi.LoadRequest, pull bool) (*loadRun, error) {
	if p.token == "" {
		return nil, agentErr(agentapi.CodeUnauthenticated, "loading needs your registry token: the node pulls as you", "run `faas login`")
	}
	if req.Slot != nil {
		if _, err := s.cfg.Slots.Slot(*req.Slot); err != nil {
			return nil, agentErr(agentapi.CodeNotFound, err.Error(), "see `faas status` for the slots of this host")
		}
	}
	select {
	case s.sem <- struct{}{}:
	default:
		return nil, agentErr(agentapi.CodeBusy, "the node is running as many loads as it allows", "retry in a moment")
	}
	kind := "load"
	if pull {
		kind = "pull"
	}
	l := agentapi.Load{ID: newID(), Kind: kind, Image: agentapi.Image{Ref: req.Image}, Tenant: p.tenant,
		State: agentapi.LoadRunning, Started: time.Now().UTC()}
	run := s.loads.add(l)
	lreq := loader.Request{ID: l.ID, Image: req.Image, Slot: req.Slot, PullOnly: pull,
		Tenant:   loader.Tenant{Name: p.tenant, ID: p.tenantID, Token: p.token},
		Reserved: s.pool.claims,
		Progress: func(ev agentapi.Event) { run.update(nil, &ev) },
		Phase: func(name string, done *agentapi.PhaseTime) {
			if done == nil {
				run.update(func(l *agentapi.Load) { l.Phase = name }, &agentapi.Event{Phase: name})
				return
			}
			run.update(func(l *agentapi.Load) { l.Phases = append(l.Phases, *done) }, nil)
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() { <-s.sem }()
		s.runLoad(p, lreq, run)
	}()
	return run, nil
}

// runLoad carries out a load begun by beginLoad and records how it ended.
func (s *Server) runLoad(p *principal, lreq loader.Request, run *loadRun) {
	// A load outlives the request that started it (--async), but
	// not the agent: shutdown cancels it, and it rolls back.
	ctx, cancel := context.WithTimeout(s.base, 10*time.Minute)
	defer cancel()
	if lreq.Slot != nil && !lreq.PullOnly {
		// A tenant reloading its own slot (or board) ends the
		// sessions there first; the loader refuses to load over
		// anyone else's, so theirs are left alone.
		var own []int
		for _, i := range []int{*lreq.Slot, *lreq.Slot ^ 1} {
			if i < s.cfg.Slots.Len() && p.tenant != "" && !s.pool.claims(i) {
				if rec := s.cfg.Slots.Record(i); rec.State == agentapi.Loaded && rec.Tenant == p.tenant {
					own = append(own, i)
				}
			}
		}
		s.hub.closeSlots(own)
	}
	res, err := s.cfg.Loader.Load(ctx, lreq)
	if err == nil {
		s.hub.closeSlots(res.Slots)
	}
	s.poke()
	run.update(func(l *agentapi.Load) {
		l.Finished = time.Now().UTC()
		l.Phase = ""
		if res.Image.Digest != "" {
			l.Image = res.Image
		}
		l.Slots = res.Slots
		l.State = agentapi.LoadDone
		if err != nil {
			l.State = agentapi.LoadFailed
			l.Error = loaderWireError(err)
		}
	}, nil)
	final := run.snapshot()
	run.update(nil, &agentapi.Event{Load: &final})
}

// wait blocks until the load ends or ctx does, and returns it.
func (r *loadRun) wait(ctx context.Context) (agentapi.Load, error) {
	for {
		_, done, changed := r.since(0)
		if done {
			return r.snapshot(), nil
		}
		select {
		case <-ctx.Done():
			return agentapi.Load{}, ctx.Err()
		case <-changed:
		}
	}
}

func (s *Server) loadFor(w http.ResponseWriter, r *http.Request, p *principal) *loadRun {
	run := s.loads.get(r.PathValue("id"))
	if run == nil || (!p.operator && run.snapshot().Tenant != p.tenant) {
		writeWireError(w, http.StatusNotFound, agentapi.Error{Code: agentapi.CodeNotFound, Message: "no such load: " + r.PathValue("id")})
		return nil
	}
	return run
}

func (s *Server) getLoad(w http.ResponseWriter, r *http.Request, p *principal) {
	if run := s.loadFor(w, r, p); run != nil {
		writeJSON(w, http.StatusOK, run.snapshot())
	}
}

// loadEvents streams a load's events as NDJSON, from the first, until the
// final one (which carries the finished Load).
func (s *Server) loadEvents(w http.ResponseWriter, r *http.Request, p *principal) {
	run := s.loadFor(w, r, p)
	if run == nil {
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	flusher, _ := w.(http.Flusher)
	next := 0
	for {
		evs, ended, changed := run.since(next)
		next += len(evs)
		for _, ev := range evs {
			if enc.Encode(ev) != nil {
				return
			}
		}
		bw.Flush()
		if flusher != nil {
			flusher.Flush()
		}
		if ended && len(evs) > 0 && evs[len(evs)-1].Load != nil {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
