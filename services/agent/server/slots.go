package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/slots"
)

func (s *Server) slotParam(w http.ResponseWriter, r *http.Request) (slots.Slot, bool) {
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil {
		badRequest(w, "slot %q: want a number", r.PathValue("n"))
		return slots.Slot{}, false
	}
	sl, err := s.cfg.Slots.Slot(n)
	if err != nil {
		writeWireError(w, http.StatusNotFound, agentapi.Error{Code: agentapi.CodeNotFound, Message: err.Error(), Hint: "see `faas status` for the slots of this host"})
		return sl, false
	}
	return sl, true
}

// view renders a slot for p.
func (s *Server) view(sl slots.Slot, p *principal, detail bool) agentapi.Slot {
	rec := s.cfg.Slots.Record(sl.Index)
	v := agentapi.Slot{Index: sl.Index, Board: sl.Board.ID, BoardModel: sl.Board.Model.Name, Serial: sl.Board.Serial,
		Chip: sl.Chip.Index(), Part: sl.Chip.Part().Name, State: rec.State, Reason: rec.Reason, Role: rec.Role}
	if v.State == "" {
		v.State = agentapi.Cleared
	}
	if s.cfg.Slots.Held(sl.Index) && v.State != agentapi.Loading {
		v.State = agentapi.Loading
	}
	if v.State == agentapi.Loaded && s.hub.busy(sl.Index) {
		v.State = agentapi.Busy
	}
	if p.owns(rec) || (p.grant != nil && p.grant.whole(sl.Index)) {
		v.Image, v.Tenant, v.LoadedAt = rec.Image, rec.Tenant, rec.LoadedAt
	} else if rec.Tenant != "" {
		v.Role, v.Reason = nil, ""
	}
	if detail {
		if se, err := sl.Chip.Sensors(); err == nil {
			h := "ok"
			if err := sl.Chip.Health(); err != nil {
				h = err.Error()
			}
			v.Sensors = &agentapi.Sensors{TempC: se.TempC, PowerW: se.PowerW, VCCIntV: se.VCCIntV, Clock0MHz: se.Clock0MHz,
				Clock1MHz: se.Clock1MHz, LinkUp: se.LinkUp, Health: h}
		}
	}
	return v
}

func (s *Server) listSlots(w http.ResponseWriter, _ *http.Request, p *principal) {
	out := agentapi.SlotList{Slots: []agentapi.Slot{}}
	for i := range s.cfg.Slots.Len() {
		sl, _ := s.cfg.Slots.Slot(i)
		out.Slots = append(out.Slots, s.view(sl, p, false))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSlot(w http.ResponseWriter, r *http.Request, p *principal) {
	if sl, ok := s.slotParam(w, r); ok {
		writeJSON(w, http.StatusOK, s.view(sl, p, true))
	}
}

func (s *Server) clearSlot(w http.ResponseWriter, r *http.Request, p *principal) {
	sl, ok := s.slotParam(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Minute)
	defer cancel()
	err := s.clear(ctx, sl.Index, func(i int, r slots.Record) error {
		if r.Tenant != "" && (r.State == agentapi.Loaded || r.State == agentapi.Busy) && !p.owns(r) {
			return agentErr(agentapi.CodePermission, fmt.Sprintf("slot %d is held by another tenant", i), "")
		}
		if !p.operator && s.pool.claims(i) {
			return agentErr(agentapi.CodePermission, fmt.Sprintf("slot %d is held by an attachment of the accelerator pool", i),
				"detach the attachment (faas detach); its release clears the slot")
		}
		return nil
	})
	var cf *clearFailed
	switch {
	case errors.As(err, &cf):
		writeWireError(w, http.StatusInternalServerError, agentapi.Error{Code: agentapi.CodeInternal, Message: cf.err.Error(), Hint: "the slot is marked failed; tell the operator"})
		return
	case err != nil:
		writeErrorFor(w, err, agentapi.CodeBusy, "wait for the running operation to finish")
		return
	}
	writeJSON(w, http.StatusOK, s.view(sl, p, false))
}

// clearFailed is a clear that reached the chip and failed there.
type clearFailed struct{ err error }

func (e *clearFailed) Error() string { return e.err.Error() }

// clear clears slot i, with the rest of its group when a two-chip image is
// loaded there, once check has accepted every slot of the group: sessions
// end, then the chips are cleared and their memory zeroed, and the clear
// is reported as usage.
func (s *Server) clear(ctx context.Context, i int, check func(int, slots.Record) error) error {
	op := newID()
	rec := s.cfg.Slots.Record(i)
	group := []int{i}
	if rec.State == agentapi.Loaded && len(rec.Group) > 0 {
		group = rec.Group // a two-chip image is cleared as one
	}
	if err := s.cfg.Slots.Acquire(op, group, check); err != nil {
		return err
	}
	released := false
	release := func() {
		if !released {
			released = true
			s.cfg.Slots.Release(op, group)
		}
	}
	defer release()
	for _, i := range group {
		rr := s.cfg.Slots.Record(i)
		s.cfg.Slots.Set([]int{i}, slots.Record{State: agentapi.Loading, Group: group, Tenant: rr.Tenant, Image: rr.Image})
	}
	s.wg.Add(1)
	defer s.wg.Done()
	s.hub.closeSlots(group) // sessions end before the chip is wiped
	if err := s.cfg.Slots.ClearSlots(ctx, group); err != nil {
		s.log.Error("clear failed", "slots", group, "err", err)
		return &clearFailed{err}
	}
	s.poke()
	s.log.Info("cleared", "slots", group, "tenant", rec.Tenant)
	s.reportClear(rec, group, op)
	release()
	return nil
}

func (s *Server) reportClear(rec slots.Record, group []int, op string) {
	// The registry takes usage only under the load's grant; a slot loaded
	// before grants existed has none to name.
	if s.cfg.NodeID == "" || rec.TenantID == "" || rec.GrantID == "" || rec.Image == nil {
		return
	}
	now := time.Now().UTC()
	var recs []registryapi.UsageRecord
	for _, i := range group {
		slot, d := i, rec.Image.Digest
		recs = append(recs, registryapi.UsageRecord{ReportID: fmt.Sprintf("%s/%d", op, i), TenantID: rec.TenantID, GrantID: rec.GrantID,
			ManifestDigest: &d, Slot: &slot, Event: "clear", StartedAt: &rec.LoadedAt, EndedAt: &now})
	}
	// Queued, not sent once: a registry that is away or cannot write (503)
	// gets the report later, and the slot is cleared regardless.
	s.cfg.Registry.QueueUsage(s.cfg.NodeID, recs)
}

// listImages lists the cache: for a tenant, the blobs it pulled or loaded
// itself (cache.Cache.AddUser); for the operator, all.
func (s *Server) listImages(w http.ResponseWriter, _ *http.Request, p *principal) {
	used, max := s.cfg.Cache.Usage()
	out := agentapi.ImageList{Images: []agentapi.CachedBlob{}, UsedBytes: used, MaxBytes: max}
	for _, e := range s.cfg.Cache.List() {
		if !p.operator && (p.tenant == "" || !slices.Contains(e.Users, p.tenant)) {
			continue
		}
		out.Images = append(out.Images, agentapi.CachedBlob{Digest: e.Digest, Size: e.Size, LastUsed: e.LastUsed})
	}
	writeJSON(w, http.StatusOK, out)
}
