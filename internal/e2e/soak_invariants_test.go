package e2e

import (
	"context"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// stampSlack is what two timestamps of one moment may differ by: the
// database's now() is its transaction's start, a few milliseconds before
// the tenant hears the answer; generous for -race.
const stampSlack = time.Second

// terminalAudit is the audit action that records each terminal state.
var terminalAudit = map[poolapi.State]string{
	poolapi.Detached: "attachment.detach",
	poolapi.Expired:  "attachment.expired",
	poolapi.Lost:     "attachment.lost",
	poolapi.Failed:   "attachment.failed",
}

// check runs the invariants over the settled platform.
func (s *soak) check() {
	ctx := s.t.Context()
	atts := s.attachments(ctx)
	audits := s.audits(ctx)
	ends := map[string]int{}
	for id, a := range atts {
		ends[a.state]++
		if a.errMsg != "" {
			msg := a.errMsg
			if len(msg) > 70 {
				msg = msg[:70]
			}
			s.stats.inc(s.stats.failedWhy, msg)
		}
		s.checkUsage(a)
		s.checkAudit(a, audits[id])
	}
	s.mu.Lock()
	for i := range s.notes {
		for _, id := range s.notes[i].attachments {
			if a := atts[id]; a != nil {
				s.notes[i].records = append(s.notes[i].records, fmt.Sprintf("%s: %s on %s slot %d, created %s, ready %v, ended %v, released %v, error %q; audit %v",
					id, a.state, a.node, a.slot, a.created.Format(time.TimeOnly), stamp(a.ready), stamp(a.ended), stamp(a.released), a.errMsg, audits[id]))
			}
		}
	}
	s.ends = ends
	records := append([]*record(nil), s.records...)
	s.mu.Unlock()
	for _, r := range records {
		a := atts[r.id]
		if a == nil {
			s.violate("%s's attachment %s is not in the registry's database", r.tenant, r.id)
			continue
		}
		s.checkRecord(r, a)
	}
	s.checkSummary(ctx, atts)
}

// stamp is a nullable time of day, for a note.
func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format(time.TimeOnly + ".000")
}

// checkUsage: exactly one attach usage record, closed, and equal to the
// attachment's time from creation to its end within one lease; and an
// expired lease ended within one lease of running out (plus the time
// PostgreSQL was down, when nobody could reap it).
func (s *soak) checkUsage(a *dbAttachment) {
	if a.usageRows != 1 || a.usageStart == nil || a.usageEnd == nil || a.ended == nil {
		s.violate("attachment %s (%s): %d usage records, started %v ended %v; attachment ended %v",
			a.id, a.state, a.usageRows, a.usageStart, a.usageEnd, a.ended)
		return
	}
	s.stats.check("one closed usage record per attachment")
	usage := a.usageEnd.Sub(*a.usageStart)
	attached := a.ended.Sub(a.created)
	if d := usage - attached; d > a.lease || d < -a.lease {
		s.violate("attachment %s: usage %v, attached %v (created %v, ended %v): more than a lease (%v) apart",
			a.id, usage, attached, a.created, *a.ended, a.lease)
	} else {
		s.stats.check("usage equals attached time within a lease")
	}
	if a.state == string(poolapi.Expired) {
		late := a.ended.Sub(a.leaseExpires)
		allowed := a.lease + s.pgDownDuring(a.leaseExpires, *a.ended)
		if late < 0 || late > allowed {
			s.violate("attachment %s expired %v after its lease ran out (%v), want within [0, %v]", a.id, late, a.leaseExpires, allowed)
		} else {
			s.stats.check("an expired lease ended within a lease of running out")
		}
	}
}

// checkAudit: one create, one record of the terminal state, none of
// another terminal state, a ready if it was ever ready, and a release
// (with the chip scrubbed, for all but a warm keep) once released.
func (s *soak) checkAudit(a *dbAttachment, actions map[string]int) {
	ok := true
	want := func(action string, cond bool, what string) {
		if !cond {
			ok = false
			s.violate("attachment %s (%s): %d %s audit records, want %s", a.id, a.state, actions[action], action, what)
		}
	}
	want("attachment.create", actions["attachment.create"] == 1, "1")
	for st, action := range terminalAudit {
		if string(st) == a.state {
			want(action, actions[action] == 1, "1")
		} else {
			want(action, actions[action] == 0, "0")
		}
	}
	want("attachment.ready", (a.ready != nil) == (actions["attachment.ready"] >= 1), "at least 1 exactly when it was ready")
	if a.state != string(poolapi.Failed) {
		want("attachment.released", (a.released != nil) == (actions["attachment.released"] >= 1), "at least 1 exactly when released")
	}
	if ok {
		s.stats.check("an audit record for every transition")
	}
}

// checkRecord compares the registry's account of an attachment with its
// tenant's: no usage before the tenant asked or after its detach
// returned, none short of the time it held it, and a vanished lease
// expired no earlier than its last acknowledged renewal allowed.
func (s *soak) checkRecord(r *record, a *dbAttachment) {
	if a.usageStart == nil || a.usageEnd == nil {
		return // checkUsage said so
	}
	if a.usageStart.Before(r.callStart.Add(-stampSlack)) {
		s.violate("%s's attachment %s: usage starts %v, before the tenant asked at %v", r.tenant, r.id, *a.usageStart, r.callStart)
	}
	switch r.how {
	case endDetached, endCut:
		if r.endDone.IsZero() {
			break // a vanished one cut under the tenant
		}
		if a.usageEnd.After(r.endDone.Add(stampSlack)) {
			s.violate("%s's attachment %s: usage ends %v, after the detach returned at %v", r.tenant, r.id, *a.usageEnd, r.endDone)
		} else {
			s.stats.check("no usage after a detach returned")
		}
		if a.state == string(poolapi.Detached) && a.usageEnd.Before(r.endStart.Add(-stampSlack)) {
			s.violate("%s's attachment %s: detached at %v, before the tenant detached at %v", r.tenant, r.id, *a.usageEnd, r.endStart)
		}
		if r.how == endDetached && a.state != string(poolapi.Detached) && a.usageEnd.Before(r.expires.Add(-stampSlack)) {
			// Ended otherwise while the tenant held it: only the lease
			// running out (its replica unreachable) or its node lost may.
			if a.state != string(poolapi.Lost) {
				s.violate("%s's attachment %s ended %s at %v, before its lease ran out at %v", r.tenant, r.id, a.state, *a.usageEnd, r.expires)
			}
		}
	case endVanished:
		if a.state != string(poolapi.Expired) && a.state != string(poolapi.Lost) {
			s.violate("%s's vanished attachment %s ended %s, want expired (or lost)", r.tenant, r.id, a.state)
		}
		if a.state == string(poolapi.Expired) && a.usageEnd.Before(r.expires.Add(-stampSlack)) {
			s.violate("%s's vanished attachment %s expired at %v, before its acknowledged lease ran out at %v", r.tenant, r.id, *a.usageEnd, r.expires)
		} else {
			s.stats.check("a vanished lease expired, not before its acknowledged end")
		}
	}
}

// audits counts the audit records of every attachment by action.
func (s *soak) audits(ctx context.Context) map[string]map[string]int {
	conn := s.db(ctx)
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `select target_id, action, count(*) from audit_log where target_type = 'attachment' group by 1, 2`)
	if err != nil {
		s.t.Fatalf("soak: reading the audit log: %v", err)
	}
	defer rows.Close()
	out := map[string]map[string]int{}
	for rows.Next() {
		var id, action string
		var n int
		if err := rows.Scan(&id, &action, &n); err != nil {
			s.t.Fatalf("soak: reading the audit log: %v", err)
		}
		if out[id] == nil {
			out[id] = map[string]int{}
		}
		out[id][action] = n
	}
	if err := rows.Err(); err != nil {
		s.t.Fatalf("soak: reading the audit log: %v", err)
	}
	return out
}

// checkSummary: each tenant's /usage/summary counts each attachment once
// and bills the sum of their usage records.
func (s *soak) checkSummary(ctx context.Context, atts map[string]*dbAttachment) {
	want := map[string]struct {
		n  int64
		ns int64
	}{}
	for _, a := range atts {
		w := want[a.tenant]
		w.n++
		if a.usageStart != nil && a.usageEnd != nil {
			w.ns += a.usageEnd.Sub(*a.usageStart).Nanoseconds()
		}
		want[a.tenant] = w
	}
	for _, who := range soakTenants {
		sum, err := as(s.t, s.replicas[0].url, who).UsageSummary(ctx, nil)
		if err != nil {
			s.t.Fatalf("%s: %v", who, err)
		}
		var n, ns int64
		for _, it := range sum.Items {
			n += it.Attachments
			ns += it.AttachedNs
		}
		w := want[who]
		// Microsecond timestamps: each record may round by one.
		if d := ns - w.ns; n != w.n || d > n*1000 || d < -n*1000 {
			s.violate("%s's usage summary: %d attachments, %v attached; the records hold %d, %v",
				who, n, time.Duration(ns), w.n, time.Duration(w.ns))
		} else {
			s.stats.check("a tenant's usage summary counts each attachment once")
		}
	}
}

// endStates counts the attachments by terminal state (set by check).
func (s *soak) endStates() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.ends {
		out[k] = v
	}
	for _, r := range s.records {
		out["tenant: "+r.how]++
	}
	return out
}
