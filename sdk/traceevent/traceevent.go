// Package traceevent writes job profiles (sdk/faas profile logs) as Chrome
// trace-event JSON, the "JSON object format" of the Trace Event Format,
// which Perfetto (ui.perfetto.dev) and chrome://tracing open.
//
// # Layout
//
// Each slot is a process, "slot N (AliDNN engine)", with one track (thread)
// per engine queue: load, compute and store. Each tenant is a process,
// "tenant NAME", with tracks of its jobs: a slice per job from Submit to
// its completion, and inside it the job's queue wait in faasd and its run
// on the engine. Jobs in flight at once (a pipelined session) take further
// tracks, "jobs 2", "jobs 3", … as a viewer draws no partial overlaps.
//
// Times are the SDK host's clock in microseconds from the first job's
// Submit. faasd measures a job's queue wait and engine time but not when
// the request reached it, so the engine's start is placed half the
// transport time after Submit. The queue tracks draw each queue's busy
// share of the modeled run over the host time of the run (a queue busy for
// 40% of the modeled cycles covers the first 40% of the run), so that they
// line up with the jobs; the modeled cycles, busy and stall cycles and
// bytes are in each slice's args.
package traceevent

import (
	"cmp"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/fpga-faas/faas/sdk/faas"
)

// Event is one trace event. Ph is "X" (a complete slice, with Dur) or "M"
// (metadata: process_name, thread_name, process_sort_index).
type Event struct {
	Name string         `json:"name"`
	Cat  string         `json:"cat,omitempty"`
	Ph   string         `json:"ph"`
	TS   float64        `json:"ts"`
	Dur  *float64       `json:"dur,omitempty"`
	PID  int            `json:"pid"`
	TID  int            `json:"tid"`
	Args map[string]any `json:"args,omitempty"`
}

// File is a trace in the JSON object format.
type File struct {
	TraceEvents     []Event `json:"traceEvents"`
	DisplayTimeUnit string  `json:"displayTimeUnit"`
}

// Queue tracks of a slot's process.
const (
	tidLoad = iota + 1
	tidCompute
	tidStore
)

var queueNames = [3]string{"load", "compute", "store"}

// enginePID is the process of slot n; tenants are numbered from 1.
func enginePID(slot int) int { return 1_000_000 + slot }

// Build lays the profiles of logs out as a trace.
func Build(logs ...faas.ProfileLog) File {
	f := File{TraceEvents: []Event{}, DisplayTimeUnit: "ns"}
	origin := firstSubmitted(logs)
	us := func(t time.Time) float64 { return float64(t.Sub(origin).Nanoseconds()) / 1e3 }
	meta := func(pid, tid int, name, value string) {
		f.TraceEvents = append(f.TraceEvents, Event{Name: name, Ph: "M", PID: pid, TID: tid, Args: map[string]any{"name": value}})
	}
	slice := func(pid, tid int, name, cat string, ts, dur float64, args map[string]any) {
		d := max(dur, 0)
		f.TraceEvents = append(f.TraceEvents, Event{Name: name, Cat: cat, Ph: "X", TS: max(ts, 0), Dur: &d, PID: pid, TID: tid, Args: args})
	}
	tenants := map[string]int{}
	lanes := map[int][]float64{} // per tenant process: where each job track is free from
	slots := map[int]bool{}
	var engine []Event // the queue slices, made serial per track below
	for _, l := range logs {
		pid, ok := tenants[l.Tenant]
		if !ok {
			pid = len(tenants) + 1
			tenants[l.Tenant] = pid
			meta(pid, 0, "process_name", "tenant "+l.Tenant)
		}
		epid := enginePID(l.Slot)
		if !slots[l.Slot] {
			slots[l.Slot] = true
			meta(epid, 0, "process_name", "slot "+strconv.Itoa(l.Slot)+" (AliDNN engine)")
			for q, n := range queueNames {
				meta(epid, tidLoad+q, "thread_name", n)
			}
		}
		ps := slices.Clone(l.Profiles)
		slices.SortStableFunc(ps, func(a, b faas.Profile) int { return a.Submitted.Compare(b.Submitted) })
		for _, p := range ps {
			sub, rt := us(p.Submitted), float64(p.RoundTrip().Nanoseconds())/1e3
			// Jobs in flight together go on tracks of their own, as a
			// viewer cannot draw slices that partly overlap on one.
			lane := slices.IndexFunc(lanes[pid], func(free float64) bool { return free <= sub })
			if lane < 0 {
				lane = len(lanes[pid])
				lanes[pid] = append(lanes[pid], 0)
				name := "jobs"
				if lane > 0 {
					name += " " + strconv.Itoa(lane+1)
				}
				meta(pid, lane+1, "thread_name", name)
			}
			lanes[pid][lane] = sub + rt
			tid := lane + 1
			qw, eng := float64(p.QueueWait.Nanoseconds())/1e3, float64(p.Engine.Nanoseconds())/1e3
			// Keep the inner slices inside the job's: the clocks of two
			// processes, rounded, may disagree by a little.
			qw, eng = min(qw, rt), min(eng, max(rt-qw, 0))
			start := sub + max(rt-qw-eng, 0)/2
			name := "job " + strconv.FormatUint(p.Job, 10)
			if p.Failed {
				name += " (failed)"
			}
			s := p.Stats
			slice(pid, tid, name, "job", sub, rt, map[string]any{
				"slot": l.Slot, "device_ns": s.DeviceNS(), "cycles": s.Cycles, "macs": s.MACs,
				"load_bytes": s.LoadBytes, "store_bytes": s.StoreBytes, "queue_wait_ns": p.QueueWait.Nanoseconds(),
				"engine_ns": p.Engine.Nanoseconds(),
			})
			slice(pid, tid, "queue wait", "queue", start, qw, nil)
			slice(pid, tid, "engine", "engine", start+qw, eng, nil)
			engine = append(engine, queueSlices(p, l.Tenant, epid, start+qw, eng)...)
		}
	}
	f.TraceEvents = append(f.TraceEvents, serial(engine)...)
	return f
}

// firstSubmitted is when the first job of logs was submitted: the trace's
// time 0.
func firstSubmitted(logs []faas.ProfileLog) time.Time {
	var origin time.Time
	for _, l := range logs {
		for _, p := range l.Profiles {
			if origin.IsZero() || p.Submitted.Before(origin) {
				origin = p.Submitted
			}
		}
	}
	return origin
}

// queueSlices are the slices of job p's time in each engine queue of
// process epid, from ts for eng µs: each queue's share of the engine time
// is its busy share of the job's cycles.
func queueSlices(p faas.Profile, tenant string, epid int, ts, eng float64) []Event {
	var out []Event
	s := p.Stats
	busy, stalls := p.Busy(), p.Stalls()
	for q := range queueNames {
		if busy[q] == 0 {
			continue
		}
		share := 1.0
		if s.Cycles > 0 {
			share = min(float64(busy[q])/float64(s.Cycles), 1)
		}
		args := map[string]any{"job": p.Job, "tenant": tenant, "busy_cycles": busy[q], "stall_cycles": stalls[q], "cycles": s.Cycles}
		switch q {
		case 0:
			args["bytes"] = s.LoadBytes
		case 1:
			args["macs"] = s.MACs
		case 2:
			args["bytes"] = s.StoreBytes
		}
		d := max(eng*share, 0)
		out = append(out, Event{Name: queueNames[q], Cat: "queue", Ph: "X", TS: max(ts, 0), Dur: &d, PID: epid, TID: tidLoad + q, Args: args})
	}
	return out
}

// serial orders the engine's queue slices by track and time. The engine
// runs one job at a time, so its slices follow each other; where the
// estimated starts make two overlap, the later starts when the earlier
// ends.
func serial(engine []Event) []Event {
	slices.SortStableFunc(engine, func(a, b Event) int {
		if c := cmp.Compare(a.PID, b.PID); c != 0 {
			return c
		}
		if c := cmp.Compare(a.TID, b.TID); c != 0 {
			return c
		}
		return cmp.Compare(a.TS, b.TS)
	})
	for i := 1; i < len(engine); i++ {
		prev, e := &engine[i-1], &engine[i]
		if prev.PID != e.PID || prev.TID != e.TID {
			continue
		}
		if end := prev.TS + *prev.Dur; e.TS < end {
			d := max(e.TS+*e.Dur-end, 0)
			e.TS, e.Dur = end, &d
		}
	}
	return engine
}

// Write writes the trace of logs to w as JSON.
func Write(w io.Writer, logs ...faas.ProfileLog) error {
	return json.NewEncoder(w).Encode(Build(logs...))
}
