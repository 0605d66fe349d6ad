package server

// Tenant sessions: POST /v1/slots/{n}/session upgrades the connection to
// the session protocol of sdk/agentapi/session and runs it over a session of
// the slot's sessions.Engine.
//
// # Who may open a session
//
// A slot's sessions are for the tenant that loaded it, for the tenants the
// operator shares it with (Config.SharedWith, by slot), for the operator,
// and for the allocation credentials that name the slot (grants.go). The engine knows the caller by tenant name (the operator, when
// it has no tenant token, as "operator"): quotas and fair shares are per
// tenant, windows and buffers per session.
//
// # Engines
//
// One engine per slot whose loaded role is AliDNN, created by the first
// session and stopped, with every session on it, when the slot is cleared,
// reloaded, or found loaded anew since the engine started (its record's
// LoadedAt changed). Its Run lives as long as Serve.

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/services/agent/sessions"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// engineStopTimeout bounds the wait for an engine's scheduler to stop.
const engineStopTimeout = 30 * time.Second

// operatorTenant is the tenant name of the operator's own sessions.
const operatorTenant = "operator"

// sessionHub holds the engines of the host's slots.
type sessionHub struct {
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

func newSessionHub(s *Server) *sessionHub {
	return &sessionHub{s: s, engines: map[int]*engineRun{}, stopping: map[int]*engineRun{}, retired: map[int]sessions.Activity{}}
}

// open starts a session of tenant on slot sl, whose record is rec. A slot
// whose engine is being stopped gets its next engine only once the old one
// has stopped with every session closed: both would hand out the same DDR
// regions and windows, and a closing session's zeroing would run over the
// next tenant's buffers and program.
func (h *sessionHub) open(ctx context.Context, sl slots.Slot, rec slots.Record, tenant string) (*sessions.Session, error) {
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
func (h *sessionHub) start(sl slots.Slot, rec slots.Record) (*engineRun, error) {
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
func (h *sessionHub) closeSlots(idx []int) {
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
func (h *sessionHub) retire(i int, er *engineRun) {
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
func (h *sessionHub) activity() map[int]sessions.Activity {
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
func (h *sessionHub) busy(slot int) bool {
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

// maySession reports whether p may open sessions on slot i.
func (s *Server) maySession(p *principal, i int, rec slots.Record) bool {
	if p.operator {
		return true
	}
	if p.grant != nil {
		return p.grant.whole(i) || p.grant.g.Shares[i] > 0
	}
	if p.tenant == "" {
		return false
	}
	return rec.Tenant == p.tenant || slices.Contains(s.cfg.SharedWith[i], p.tenant)
}

func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

// openSession upgrades the request to a session on slot {n}.
func (s *Server) openSession(w http.ResponseWriter, r *http.Request, p *principal) {
	if !headerHas(r.Header, "Connection", "upgrade") || !headerHas(r.Header, "Upgrade", session.Protocol) {
		w.Header().Set("Upgrade", session.Protocol)
		writeWireError(w, http.StatusUpgradeRequired, agentapi.Error{Code: agentapi.CodeBadRequest,
			Message: "a session needs Connection: Upgrade and Upgrade: " + session.Protocol})
		return
	}
	sl, ok := s.slotParam(w, r)
	if !ok {
		return
	}
	rec := s.cfg.Slots.Record(sl.Index)
	// State first: every caller may see it (GET /v1/slots), and "not
	// yours" would be a puzzling answer about an empty slot.
	if rec.State != agentapi.Loaded || rec.Role == nil || rec.Role.ID != alidnn.ID || s.cfg.Slots.Held(sl.Index) {
		writeWireError(w, http.StatusConflict, agentapi.Error{Code: agentapi.CodeBusy,
			Message: fmt.Sprintf("slot %d has no AliDNN engine loaded", sl.Index), Hint: "load an AliDNN image into it first"})
		return
	}
	if p.grant == nil && !p.operator && s.pool.owns(sl.Index) {
		// The pool's slots are used through attachments, which it
		// accounts and ends; a tenant's token is not one, even the
		// loader's (a share's chip is loaded as its first tenant).
		writeWireError(w, http.StatusForbidden, agentapi.Error{Code: agentapi.CodePermission,
			Message: fmt.Sprintf("slot %d belongs to the accelerator pool", sl.Index), Hint: "open it with your attachment's credential (faas attach)"})
		return
	}
	if !s.maySession(p, sl.Index, rec) {
		writeWireError(w, http.StatusForbidden, agentapi.Error{Code: agentapi.CodePermission,
			Message: fmt.Sprintf("slot %d is not yours", sl.Index), Hint: "open a slot you loaded, or ask the operator to share it"})
		return
	}
	tenant := p.tenant
	switch {
	case p.grant != nil && p.grant.whole(sl.Index):
		if err := s.cfg.Grants.bind(p.grant, sl.Index, rec.Tenant); err != nil {
			writeWireError(w, http.StatusForbidden, agentapi.Error{Code: agentapi.CodePermission, Message: err.Error(),
				Hint: "the pod's chip changed hands; restart the pod"})
			return
		}
		tenant = rec.Tenant // the pod works for whoever loaded its chip
	case p.grant != nil:
		release, err := s.cfg.Grants.takeWindow(p.grant, sl.Index)
		if err != nil {
			writeWireError(w, statusOf(agentapi.CodeQuota), agentapi.Error{Code: agentapi.CodeQuota, Message: err.Error(),
				Hint: "close a session first, or request more faas.dev/alidnn-share"})
			return
		}
		defer release()
		tenant = p.grant.tenant()
	}
	if tenant == "" {
		tenant = operatorTenant
	}
	sess, err := s.hub.open(r.Context(), sl, rec, tenant)
	if err != nil {
		code := sessionCode(err)
		if code == agentapi.CodeInternal {
			s.log.Error("opening a session", "slot", sl.Index, "err", err)
		}
		writeWireError(w, statusOf(code), agentapi.Error{Code: code, Message: err.Error()})
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		sess.Close()
		writeWireError(w, http.StatusInternalServerError, agentapi.Error{Code: agentapi.CodeInternal, Message: "connection cannot be upgraded"})
		return
	}
	conn, brw, err := hj.Hijack()
	if err != nil {
		sess.Close()
		return
	}
	conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + session.Protocol + "\r\n\r\n")); err != nil {
		conn.Close()
		sess.Close()
		return
	}
	if p.grant != nil {
		// The credential's end (an attachment ended) ends its sessions.
		untrack, ok := s.cfg.Grants.track(p.grant, conn)
		if !ok {
			conn.Close()
			sess.Close()
			return
		}
		defer untrack()
	}
	s.log.Debug("session opened", "slot", sl.Index, "tenant", tenant)
	serveSession(conn, brw.Reader, sess, s.log.With("slot", sl.Index, "tenant", tenant))
}
