package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/poolapi"
)

// The soak's invariants, checked against the registry's database, its API
// and the nodes' operator endpoints once the tenants have stopped (and the
// memory scan after every fault).

// settleTimeout bounds the wait for every lease to end and every node to
// let go; generous, for -race on a loaded machine.
const settleTimeout = 4 * time.Minute

// dbAttachment is an attachments row.
type dbAttachment struct {
	id, tenant, state, node, errMsg string
	share, scrubbed                 bool
	lease                           time.Duration
	created, leaseExpires           time.Time
	ready, ended, released          *time.Time
	usageRows                       int
	usageStart, usageEnd            *time.Time
}

// db opens a connection to the registry's database for one look.
func (s *soak) db(ctx context.Context) *pgx.Conn {
	conn, err := pgx.Connect(ctx, s.p.pg.URL)
	if err != nil {
		s.t.Fatalf("soak: connecting to the registry's database: %v", err)
	}
	return conn
}

// attachments reads every attachment with its usage records.
func (s *soak) attachments(ctx context.Context) map[string]*dbAttachment {
	t := s.t
	conn := s.db(ctx)
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `select a.id::text, ac.name, a.state, n.name, a.error, a.share, a.scrubbed, a.lease_seconds,
		a.created_at, a.lease_expires_at, a.ready_at, a.ended_at, a.released_at
		from attachments a join accounts ac on ac.id = a.tenant_id join nodes n on n.id = a.node_id`)
	if err != nil {
		t.Fatalf("soak: reading attachments: %v", err)
	}
	out := map[string]*dbAttachment{}
	for rows.Next() {
		a := &dbAttachment{}
		var lease int
		if err := rows.Scan(&a.id, &a.tenant, &a.state, &a.node, &a.errMsg, &a.share, &a.scrubbed, &lease, &a.created, &a.leaseExpires,
			&a.ready, &a.ended, &a.released); err != nil {
			t.Fatalf("soak: reading attachments: %v", err)
		}
		a.lease = time.Duration(lease) * time.Second
		out[a.id] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("soak: reading attachments: %v", err)
	}
	rows, err = conn.Query(ctx, `select attachment_id::text, started_at, ended_at from usage_records where event = 'attach'`)
	if err != nil {
		t.Fatalf("soak: reading usage records: %v", err)
	}
	for rows.Next() {
		var id *string
		var start, end *time.Time
		if err := rows.Scan(&id, &start, &end); err != nil {
			t.Fatalf("soak: reading usage records: %v", err)
		}
		if id == nil || out[*id] == nil {
			s.violate("an attach usage record (%v–%v) belongs to no attachment", start, end)
			continue
		}
		a := out[*id]
		a.usageRows++
		a.usageStart, a.usageEnd = start, end
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("soak: reading usage records: %v", err)
	}
	return out
}

// scanMemory reads, on every node, the memory of every buffer a tenant
// wrote a marker into, and fails on any marker of an attachment its node
// has released: its data must be gone (zeroed on release, or overwritten
// by its new holder's own).
func (s *soak) scanMemory(when string) {
	ctx := s.t.Context()
	atts := s.attachments(ctx)
	s.mu.Lock()
	markers := append([]marker(nil), s.markers...)
	s.mu.Unlock()
	type where struct {
		node string
		slot int
		addr uint64
	}
	seen := map[where]bool{}
	for _, m := range markers {
		w := where{m.node, m.slot, m.addr}
		if seen[w] {
			continue
		}
		seen[w] = true
		data, err := s.readDDRAt(ctx, m.node, m.slot, m.addr, soakBufBytes)
		if err != nil {
			s.stats.inc(s.stats.opErrors, "memory scan: "+errKind(err))
			continue
		}
		for _, id := range markerAttachments(data) {
			a := atts[id]
			if a != nil && a.released != nil {
				s.violate("%s: %s slot %d at %#x holds a marker of attachment %s (%s, %s, released %v): %q",
					when, m.node, m.slot, m.addr, id, a.tenant, a.state, a.released.Format(time.RFC3339Nano), leakSample(data))
			}
		}
		s.stats.check("memory of a marked buffer holds no released attachment's marker")
	}
	s.stats.op("memory scan of every marked buffer")
}

// markerAttachments lists the attachment ids of the markers in data.
func markerAttachments(data []byte) []string {
	var ids []string
	seen := map[string]bool{}
	for rest := data; ; {
		i := bytes.Index(rest, []byte("SOAK|"))
		if i < 0 {
			return ids
		}
		rest = rest[i+5:]
		f := bytes.SplitN(rest, []byte("|"), 3)
		if len(f) == 3 && !seen[string(f[1])] {
			seen[string(f[1])] = true
			ids = append(ids, string(f[1]))
		}
	}
}

// readDDRAt reads n bytes of a slot's DDR through its node's operator
// endpoint; unlike readDDR it returns errors, for a node that may be
// restarting.
func (s *soak) readDDRAt(ctx context.Context, node string, slot int, addr uint64, n int) ([]byte, error) {
	var nd *soakNode
	for _, x := range s.nodes {
		if x.name == node {
			nd = x
		}
	}
	if nd == nil {
		return nil, fmt.Errorf("no node %q", node)
	}
	url := fmt.Sprintf("http://faasd/v1/slots/%d/ddr?addr=%#x&len=%d", slot, addr, n)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := nd.agent.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET DDR of %s slot %d: %d %s", node, slot, resp.StatusCode, body)
	}
	var out struct{ Data string }
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(out.Data)
}

// settle waits, once the tenants have stopped, until every attachment has
// ended and been released and every node's chips are cleared (the
// keep-warm is short), then scans the memory a last time. Whatever is
// still not so at the deadline is a violation.
func (s *soak) settle() {
	ctx := s.t.Context()
	deadline := time.Now().Add(settleTimeout)
	var pending []string
	for time.Now().Before(deadline) {
		pending = pending[:0]
		for id, a := range s.attachments(ctx) {
			if poolapi.State(a.state).Live() || a.released == nil {
				pending = append(pending, fmt.Sprintf("%s (%s, released %v)", id, a.state, a.released != nil))
			}
		}
		if len(pending) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, p := range pending {
		s.violate("attachment %s has not ended and been released %v after the soak", p, settleTimeout)
	}
	var held []string
	for time.Now().Before(deadline) {
		held = s.heldSlots(ctx)
		if len(held) == 0 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, h := range held {
		s.violate("no attachment lives, yet %s", h)
	}
	if len(pending) == 0 && len(held) == 0 {
		s.stats.check("every attachment ended and released")
		s.stats.check("every chip of every node cleared")
	}
	s.scanMemory("at the end")
}

// heldSlots lists the slots of every node that are not cleared.
func (s *soak) heldSlots(ctx context.Context) []string {
	var out []string
	for _, n := range s.nodes {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://faasd/v1/slots", nil)
		if err != nil {
			s.t.Fatal(err)
		}
		resp, err := n.agent.Do(req)
		if err != nil {
			out = append(out, fmt.Sprintf("%s does not answer: %v", n.name, err))
			continue
		}
		var l agentapi.SlotList
		err = json.NewDecoder(resp.Body).Decode(&l)
		resp.Body.Close()
		if err != nil || len(l.Slots) == 0 {
			out = append(out, fmt.Sprintf("%s's slots unreadable: %v", n.name, err))
			continue
		}
		for _, sl := range l.Slots {
			if sl.State != agentapi.Cleared || sl.Image != nil {
				out = append(out, fmt.Sprintf("%s slot %d is %s with image %+v (tenant %q)", n.name, sl.Index, sl.State, sl.Image, sl.Tenant))
			}
		}
	}
	return out
}
