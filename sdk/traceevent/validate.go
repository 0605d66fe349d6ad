package traceevent

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
)

// ErrInvalid is wrapped by Validate's errors.
var ErrInvalid = errors.New("traceevent: invalid trace")

// Validate checks a trace in the JSON object format against the Trace Event
// Format's rules for the phases this package writes, as a viewer's import
// does: a traceEvents array and a displayTimeUnit of "ms" or "ns"; every
// event with a name and integer pid and tid; complete events ("X") with
// numeric ts ≥ 0 and dur ≥ 0 and object args; metadata events ("M")
// naming a process or thread in args.name; every track with slices named;
// and on each track, slices that nest or follow each other, never partly
// overlap. It returns the number of slices per "process/thread" name.
func Validate(data []byte) (map[string]int, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, bad("not a JSON object: %v", err)
	}
	var unit string
	if err := json.Unmarshal(top["displayTimeUnit"], &unit); err != nil || (unit != "ms" && unit != "ns") {
		return nil, bad("displayTimeUnit %s: want \"ms\" or \"ns\"", top["displayTimeUnit"])
	}
	var events []map[string]any
	if err := json.Unmarshal(top["traceEvents"], &events); err != nil {
		return nil, bad("traceEvents: %v", err)
	}
	integer := func(e map[string]any, k string) (int, bool) {
		v, ok := e[k].(float64)
		return int(v), ok && v == math.Trunc(v) && math.Abs(v) < 1<<53
	}
	type track struct{ pid, tid int }
	type span struct{ ts, end float64 }
	procs, threads := map[int]string{}, map[track]string{}
	spans := map[track][]span{}
	for i, e := range events {
		name, _ := e["name"].(string)
		ph, _ := e["ph"].(string)
		pid, okp := integer(e, "pid")
		tid, okt := integer(e, "tid")
		if name == "" || !okp || !okt {
			return nil, bad("event %d: name, pid and tid are required (pid and tid integers)", i)
		}
		switch ph {
		case "M":
			args, _ := e["args"].(map[string]any)
			v, ok := args["name"].(string)
			switch {
			case name == "process_name" && ok:
				procs[pid] = v
			case name == "thread_name" && ok:
				threads[track{pid, tid}] = v
			default:
				return nil, bad("event %d: metadata must be process_name or thread_name with args.name", i)
			}
		case "X":
			ts, ok1 := e["ts"].(float64)
			dur, ok2 := e["dur"].(float64)
			if !ok1 || !ok2 || ts < 0 || dur < 0 {
				return nil, bad("event %d (%s): a complete event needs numeric ts ≥ 0 and dur ≥ 0", i, name)
			}
			if a, ok := e["args"]; ok {
				if _, isObj := a.(map[string]any); !isObj {
					return nil, bad("event %d (%s): args must be an object", i, name)
				}
			}
			spans[track{pid, tid}] = append(spans[track{pid, tid}], span{ts, ts + dur})
		default:
			return nil, bad("event %d (%s): phase %q", i, name, ph)
		}
	}
	counts := map[string]int{}
	for tr, ss := range spans {
		if procs[tr.pid] == "" || threads[tr] == "" {
			return nil, bad("track pid %d tid %d has slices but no process_name or thread_name", tr.pid, tr.tid)
		}
		where := procs[tr.pid] + "/" + threads[tr]
		counts[where] += len(ss)
		sort.Slice(ss, func(i, j int) bool { return ss[i].ts < ss[j].ts || ss[i].ts == ss[j].ts && ss[i].end > ss[j].end })
		var open []span
		for _, s := range ss {
			for len(open) > 0 && open[len(open)-1].end <= s.ts {
				open = open[:len(open)-1]
			}
			// A slack of a picosecond for the float rounding of µs.
			if len(open) > 0 && s.end > open[len(open)-1].end+1e-6 {
				o := open[len(open)-1]
				return nil, bad("track %s: slice [%g, %g] µs overlaps [%g, %g] without nesting", where, s.ts, s.end, o.ts, o.end)
			}
			open = append(open, s)
		}
	}
	return counts, nil
}
