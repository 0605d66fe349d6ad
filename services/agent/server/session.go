package server

// Tenant sessions: POST /v1/slots/{n}/session upgrades the connection to
// the session protocol of sdk/agentapi/session and runs it over a session of
// the slot's sessions.Engine (the hub, hub.go), one connLoop (conn.go) per
// connection.
//
// # Who may open a session
//
// A slot's sessions are for the tenant that loaded it, for the tenants the
// operator shares it with (Config.SharedWith, by slot), for the operator,
// and for the allocation credentials that name the slot (grants.go). The engine knows the caller by tenant name (the operator, when
// it has no tenant token, as "operator"): quotas and fair shares are per
// tenant, windows and buffers per session.

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// operatorTenant is the tenant name of the operator's own sessions.
const operatorTenant = "operator"

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
	serveConn(conn, brw.Reader, sess, s.log.With("slot", sl.Index, "tenant", tenant))
}
