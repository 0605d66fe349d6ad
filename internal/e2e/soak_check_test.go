package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
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
	slot, chips, usageRows          int
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
	// One snapshot for both reads: tenants attach meanwhile, and a usage
	// record committed after the attachments were read would belong to
	// none of them.
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		t.Fatalf("soak: reading attachments: %v", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	rows, err := tx.Query(ctx, `select a.id::text, ac.name, a.state, n.name, a.error, a.slot, a.chips, a.share, a.scrubbed, a.lease_seconds,
		a.created_at, a.lease_expires_at, a.ready_at, a.ended_at, a.released_at
		from attachments a join accounts ac on ac.id = a.tenant_id join nodes n on n.id = a.node_id`)
	if err != nil {
		t.Fatalf("soak: reading attachments: %v", err)
	}
	out := map[string]*dbAttachment{}
	for rows.Next() {
		a := &dbAttachment{}
		var lease int
		if err := rows.Scan(&a.id, &a.tenant, &a.state, &a.node, &a.errMsg, &a.slot, &a.chips, &a.share, &a.scrubbed, &lease, &a.created, &a.leaseExpires,
			&a.ready, &a.ended, &a.released); err != nil {
			t.Fatalf("soak: reading attachments: %v", err)
		}
		a.lease = time.Duration(lease) * time.Second
		out[a.id] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("soak: reading attachments: %v", err)
	}
	rows, err = tx.Query(ctx, `select attachment_id::text, started_at, ended_at from usage_records where event = 'attach'`)
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

// scanMemory reads, on every node, the memory of every slot where tenants
// wrote markers (the span of their buffers, gaps included, in 1 MiB
// reads), and fails on any marker of an attachment its node has
// released: its data must be gone (zeroed on release, or overwritten by
// its new holder's own).
func (s *soak) scanMemory(when string) {
	ctx := s.t.Context()
	atts := s.attachments(ctx)
	for _, r := range s.scanRanges() {
		for off := uint64(0); off < r.n; off += maxScan {
			n := min(maxScan, r.n-off)
			data, err := s.readDDRAt(ctx, r.node, r.slot, r.addr+off, int(n))
			if err != nil {
				s.stats.inc(s.stats.opErrors, "memory scan: "+errKind(err))
				continue
			}
			for _, id := range markerAttachments(data) {
				a := atts[id]
				if a != nil && a.released != nil {
					s.violate("%s: %s slot %d near %#x holds a marker of attachment %s (%s, %s, released %v): %q",
						when, r.node, r.slot, r.addr+off, id, a.tenant, a.state, a.released.Format(time.RFC3339Nano), leakSample(data))
				}
			}
			s.stats.check("a MiB of tenant memory holds no released attachment's marker")
		}
	}
	s.stats.op("memory scan of every slot's tenant memory")
	s.checkOwners(when, atts)
}

// maxScan is one DDR read of the scan: the operator endpoint's limit.
const maxScan = 1 << 20

// scanRange is a span of a slot's DDR to scan.
type scanRange struct {
	node    string
	slot    int
	addr, n uint64
}

// scanRanges merges the marked buffers of each slot into spans, joining
// buffers less than maxScan apart.
func (s *soak) scanRanges() []scanRange {
	s.mu.Lock()
	byslot := map[[2]string][]uint64{}
	for _, m := range s.markers {
		k := [2]string{m.node, fmt.Sprint(m.slot)}
		byslot[k] = append(byslot[k], m.addr)
	}
	s.mu.Unlock()
	var out []scanRange
	for k, addrs := range byslot {
		slices.Sort(addrs)
		var slot int
		fmt.Sscan(k[1], &slot)
		r := scanRange{node: k[0], slot: slot, addr: addrs[0], n: soakBufBytes}
		for _, a := range addrs[1:] {
			if a < r.addr+r.n+maxScan {
				r.n = max(r.n, a+soakBufBytes-r.addr)
				continue
			}
			out = append(out, r)
			r = scanRange{node: k[0], slot: slot, addr: a, n: soakBufBytes}
		}
		out = append(out, r)
	}
	return out
}

// ownerGrace is how long after its release a slot may still hold an
// attachment's image: the keep-warm, and generous room for a loaded
// machine's clear.
const ownerGrace = 3*time.Second + time.Minute

// checkOwners: every chip that is not cleared holds the image of a tenant
// with an attachment on it (or of a share on it) that is live, not yet
// released, or released within the keep-warm (plus room for the clear).
func (s *soak) checkOwners(when string, atts map[string]*dbAttachment) {
	ctx := s.t.Context()
	for _, n := range s.nodes {
		slots, err := s.slotsOf(ctx, n)
		if err != nil {
			s.stats.inc(s.stats.opErrors, "slot listing: "+errKind(err))
			continue
		}
		for _, sl := range slots {
			if sl.Image == nil {
				// Nothing of anyone's on it: cleared, failed, or held
				// for a load or a clear that has not recorded an image.
				continue
			}
			owned := false
			for _, a := range atts {
				on := a.node == n.name && sl.Index >= a.slot && sl.Index < a.slot+a.chips
				// A chip loaded for shares names the tenant of the share
				// that loaded it, while any share on it holds it.
				if on && (a.tenant == sl.Tenant || a.share) && (a.released == nil || time.Since(*a.released) < ownerGrace) {
					owned = true
					break
				}
			}
			if !owned {
				s.violate("%s: %s slot %d is %s for %q with no attachment of that tenant holding it", when, n.name, sl.Index, sl.State, sl.Tenant)
			} else {
				s.stats.check("a loaded chip has an owner")
			}
		}
	}
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
		slots, err := s.slotsOf(ctx, n)
		if err != nil {
			out = append(out, fmt.Sprintf("%s's slots unreadable: %v", n.name, err))
			continue
		}
		for _, sl := range slots {
			if sl.State != agentapi.Cleared || sl.Image != nil {
				out = append(out, fmt.Sprintf("%s slot %d is %s with image %+v (tenant %q)", n.name, sl.Index, sl.State, sl.Image, sl.Tenant))
			}
		}
	}
	return out
}

// slotsOf lists n's slots through its operator endpoint.
func (s *soak) slotsOf(ctx context.Context, n *soakNode) ([]agentapi.Slot, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://faasd/v1/slots", nil)
	if err != nil {
		return nil, err
	}
	resp, err := n.agent.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l agentapi.SlotList
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, err
	}
	if len(l.Slots) == 0 {
		return nil, fmt.Errorf("%s lists no slots", n.name)
	}
	return l.Slots, nil
}
