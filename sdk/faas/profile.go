package faas

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// Profile is where one job's time went, from faasd's completion and the
// SDK's own clock.
type Profile struct {
	Job uint64
	// Submitted and Completed are when Submit sent the job and when the
	// SDK read its completion (this host's clock).
	Submitted, Completed time.Time
	// QueueWait is the time in faasd from the job's arrival to the
	// engine's start: other sessions' turns, and an SRAM scrub between
	// tenants. Engine is the host time the engine ran it.
	QueueWait, Engine time.Duration
	// Stats are the engine's counters: modeled cycles, MACs, bytes loaded
	// (host-to-engine DMA) and stored (engine-to-host), and per queue
	// (load, compute, store) the busy cycles and the cycles a free queue
	// stalled on a dependency token.
	Stats alidnn.Stats
	// Failed is set for a job that did not run to its end.
	Failed bool
}

// RoundTrip is the time from Submit to the completion, as the SDK saw it.
func (p Profile) RoundTrip() time.Duration { return p.Completed.Sub(p.Submitted) }

// Device is the modeled device time of the run.
func (p Profile) Device() time.Duration { return time.Duration(p.Stats.DeviceNS()) }

// Busy returns the busy cycles of the load, compute and store queues.
func (p Profile) Busy() [3]uint64 {
	s := &p.Stats
	return [3]uint64{uint64(s.BusyLoad), uint64(s.BusyCompute), uint64(s.BusyStore)}
}

// Stalls returns the cycles the load, compute and store queues, free,
// waited for a dependency token.
func (p Profile) Stalls() [3]uint64 {
	s := &p.Stats
	return [3]uint64{uint64(s.StallLoad), uint64(s.StallCompute), uint64(s.StallStore)}
}

// Profile returns the job's profile once it has ended (ok is false
// before).
func (j *Job) Profile() (p Profile, ok bool) {
	select {
	case <-j.done:
		return j.prof, true
	default:
		return Profile{}, false
	}
}

// SessionProfile sums the profiles of a session's ended jobs.
type SessionProfile struct {
	Jobs, Failed int
	// Sums over the jobs.
	QueueWait, Engine, RoundTrip, Device time.Duration
	Cycles, MACs, LoadBytes, StoreBytes  uint64
	Busy, Stalls                         [3]uint64 // load, compute, store
	// MaxQueueWait and MaxRoundTrip are the longest of the session.
	MaxQueueWait, MaxRoundTrip time.Duration
}

// profiles is a Device's aggregate and, when asked for, its log of the
// last profiles.
type profiles struct {
	off  atomic.Bool // SetProfiling(false)
	mu   sync.Mutex
	sum  SessionProfile
	keep int
	log  []Profile // a ring of keep entries once full
	next int
}

// MaxKeptProfiles bounds KeepProfiles.
const MaxKeptProfiles = 1 << 20

// KeepProfiles makes the device keep the profiles of the last n jobs (at
// most MaxKeptProfiles) for Profiles, e.g. to export a trace; 0 stops it
// and drops those kept.
func (d *Device) KeepProfiles(n int) {
	n = min(max(n, 0), MaxKeptProfiles)
	p := &d.prof
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keep, p.log, p.next = n, nil, 0
}

// Profiles returns the kept profiles, oldest first.
func (d *Device) Profiles() []Profile {
	p := &d.prof
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Profile, 0, len(p.log))
	out = append(out, p.log[p.next:]...)
	return append(out, p.log[:p.next]...)
}

// Profile returns the sums over the session's ended jobs.
func (d *Device) Profile() SessionProfile {
	d.prof.mu.Lock()
	defer d.prof.mu.Unlock()
	return d.prof.sum
}

// SetProfiling turns the SDK's side of profiling on (the default) or off:
// off, jobs are not timed on this host (Profile's Submitted and Completed
// are zero) nor summed or kept; faasd's queue wait and engine time and the
// engine's counters still come with each job. It applies to jobs
// submitted afterwards.
func (d *Device) SetProfiling(on bool) { d.prof.off.Store(!on) }

// clockBase anchors the SDK's job times: a job's times are offsets from it
// on the monotonic clock, which time.Since reads at half the cost of
// time.Now.
var clockBase = time.Now()

// clock is the time since clockBase.
func clock() time.Duration { return time.Since(clockBase) }

// record makes the profile of job j from its completion cp.
func (p *profiles) record(j *Job, cp session.Completion, failed bool) {
	st := &cp.Stats
	pr := Profile{Job: j.id, Failed: failed, QueueWait: time.Duration(cp.QueueNS), Engine: time.Duration(cp.EngineNS), Stats: *st}
	if j.submitted == 0 { // profiling was off at Submit
		j.prof = pr
		return
	}
	rt := clock() - j.submitted
	pr.Submitted = clockBase.Add(j.submitted)
	pr.Completed = pr.Submitted.Add(rt)
	j.prof = pr
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &p.sum
	s.Jobs++
	if failed {
		s.Failed++
	}
	s.QueueWait += pr.QueueWait
	s.Engine += pr.Engine
	s.RoundTrip += rt
	s.Device += time.Duration(st.DeviceNS())
	s.Cycles += st.Cycles
	s.MACs += st.MACs
	s.LoadBytes += st.LoadBytes
	s.StoreBytes += st.StoreBytes
	s.Busy[0] += uint64(st.BusyLoad)
	s.Busy[1] += uint64(st.BusyCompute)
	s.Busy[2] += uint64(st.BusyStore)
	s.Stalls[0] += uint64(st.StallLoad)
	s.Stalls[1] += uint64(st.StallCompute)
	s.Stalls[2] += uint64(st.StallStore)
	s.MaxQueueWait = max(s.MaxQueueWait, pr.QueueWait)
	s.MaxRoundTrip = max(s.MaxRoundTrip, rt)
	if p.keep == 0 {
		return
	}
	if len(p.log) < p.keep {
		p.log = append(p.log, pr)
		return
	}
	p.log[p.next] = pr
	p.next = (p.next + 1) % p.keep
}
