package server

// The hub: the session engines (sessions.Engine) of the host's slots, which
// the tenant sessions of session.go open their sessions on.
//
// One engine per slot whose loaded role is AliDNN, created by the first
// session and stopped, with every session on it, when the slot is cleared,
// reloaded, or found loaded anew since the engine started (its record's
// LoadedAt changed). Its Run lives as long as Serve.

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// engineStopTimeout bounds the wait for an engine's scheduler to stop.
const engineStopTimeout = 30 * time.Second

// hub holds the engines of the host's slots.
type hub struct {
	s       *Server
	mu      sync.Mutex
	engines map[int]*engineRun
	// stopping are the engines being stopped, by slot: the slot gets no
	// new engine until its old one has stopped.
	stopping map[int]*engineRun
	// wrap, when set (tests only: export_test.go), stands between each
	// engine and its chip, to force the interleavings of a loaded machine.
	wrap func(slot int, c sessions.Chip) sessions.Chip
	// retired sums the activity of each slot's stopped engines, so that
	// the slot's counters survive reloads.
	retired map[int]sessions.Activity
}

type engineRun struct {
	eng      *sessions.Engine
	loadedAt time.Time
	cancel   context.CancelFunc
	done     chan struct{}
}

func newHub(s *Server) *hub {
	return &hub{s: s, engines: map[int]*engineRun{}, stopping: map[int]*engineRun{}, retired: map[int]sessions.Activity{}}
}

// open starts a session of tenant on slot sl, whose record is rec. A slot
// whose engine is being stopped gets its next engine only once the old one
// has stopped with every session closed: both would hand out the same DDR
// regions and windows, and a closing session's zeroing would run over the
// next tenant's buffers and program.
func (h *hub) open(ctx context.Context, sl slots.Slot, rec slots.Record, tenant string) (*sessions.Session, error) {
	h.mu.Lock()
	for {
		if old := h.stopping[sl.Index]; old != nil {
			h.mu.Unlock()
			select {
			case <-old.done:
			case <-ctx.Done():
				return nil, fmt.Errorf("slot %d: waiting for its sessions to end: %w", sl.Index, ctx.Err())
			}
			h.mu.Lock()
			continue
		}
		er := h.engines[sl.Index]
		if er != nil && !er.loadedAt.Equal(rec.LoadedAt) {
			h.mu.Unlock()
			h.closeSlots([]int{sl.Index})
			h.mu.Lock()
			continue
		}
		if er == nil {
			var err error
			if er, err = h.start(sl, rec); err != nil {
				h.mu.Unlock()
				return nil, err
			}
		}
		h.mu.Unlock()
		return er.eng.Open(tenant)
	}
}

// start starts slot sl's engine. h.mu held.
func (h *hub) start(sl slots.Slot, rec slots.Record) (*engineRun, error) {
	var chip sessions.Chip = sl.Chip
	if h.wrap != nil {
		chip = h.wrap(sl.Index, chip)
	}
	eng, err := sessions.New(sessions.Config{Chip: chip, DDRSize: sl.Chip.DDRSize(),
		Quotas: h.s.cfg.SessionQuotas, DefaultQuota: h.s.cfg.SessionDefaultQuota, JobTimeout: h.s.cfg.JobTimeout,
		Logger: h.s.log.With("slot", sl.Index)})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(h.s.base)
	er := &engineRun{eng: eng, loadedAt: rec.LoadedAt, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(er.done)
		if err := eng.Run(ctx); err != nil && ctx.Err() == nil {
			h.s.log.Error("session engine stopped", "slot", sl.Index, "err", err)
		}
	}()
	h.engines[sl.Index] = er
	return er, nil
}

// stop stops the engine and waits, up to engineStopTimeout, for its Run
// to return, which is after every session closed (memory zeroed). It
// reports whether it returned.
func (er *engineRun) stop() bool {
	er.cancel()
	select {
	case <-er.done:
		return true
	case <-time.After(engineStopTimeout):
		return false
	}
}

// closeSlots stops the engines of slots (clear, reload): their sessions end
// with ErrClosed and their memory is zeroed, before the chip changes. An
// engine that has not stopped in engineStopTimeout is logged; its slot
// gets no new engine until it has.
func (h *hub) closeSlots(idx []int) {
	h.mu.Lock()
	stop := map[int]*engineRun{}
	for _, i := range idx {
		if er := h.engines[i]; er != nil {
			stop[i] = er
			delete(h.engines, i)
			h.stopping[i] = er
		}
	}
	h.mu.Unlock()
	for i, er := range stop {
		h.retire(i, er)
	}
}

// retire stops er, slot i's engine, keeps its activity in the slot's
// totals, and lets the slot have a new engine once er has stopped.
func (h *hub) retire(i int, er *engineRun) {
	if !er.stop() {
		h.s.log.Error("session engine of a cleared or reloaded slot has not stopped; the slot gets no sessions until it does",
			"slot", i, "waited", engineStopTimeout)
	}
	go func() {
		<-er.done
		a := er.eng.Activity()
		h.mu.Lock()
		defer h.mu.Unlock()
		r := h.retired[i]
		r.Jobs += a.Jobs
		r.Busy += a.Busy
		h.retired[i] = r
		if h.stopping[i] == er {
			delete(h.stopping, i)
		}
	}()
}

// activity returns the totals of every slot that ran an engine, with the
// jobs queued now.
func (h *hub) activity() map[int]sessions.Activity {
	h.mu.Lock()
	out := maps.Clone(h.retired)
	// A stopping engine's counts join the retired ones when it has
	// stopped; until then they are counted here, so counters never dip.
	live := []map[int]*engineRun{maps.Clone(h.engines), maps.Clone(h.stopping)}
	h.mu.Unlock()
	for _, m := range live {
		for i, er := range m {
			a, r := er.eng.Activity(), out[i]
			r.Jobs += a.Jobs
			r.Busy += a.Busy
			r.Queued += a.Queued
			out[i] = r
		}
	}
	return out
}

// SessionUsage reports the accounting of slot's session engine, by tenant:
// nil when no session was opened on it since it was loaded.
func (s *Server) SessionUsage(slot int) []sessions.Usage {
	s.hub.mu.Lock()
	er := s.hub.engines[slot]
	s.hub.mu.Unlock()
	if er == nil {
		return nil
	}
	return er.eng.Usage()
}

// busy reports whether slot has open sessions (the slot shows as busy).
func (h *hub) busy(slot int) bool {
	h.mu.Lock()
	er := h.engines[slot]
	h.mu.Unlock()
	if er == nil {
		return false
	}
	for _, u := range er.eng.Usage() {
		if u.Sessions > 0 {
			return true
		}
	}
	return false
}
