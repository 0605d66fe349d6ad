package faas

import (
	"sync"
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

// record makes the profile of job j from its completion cp.
func (p *profiles) record(j *Job, cp session.Completion, failed bool) {
	pr := Profile{Job: j.id, Submitted: j.submitted, Completed: time.Now(), Failed: failed,
		QueueWait: time.Duration(cp.QueueNS), Engine: time.Duration(cp.EngineNS), Stats: cp.Stats}
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
	s.RoundTrip += pr.RoundTrip()
	s.Device += pr.Device()
	s.Cycles += pr.Stats.Cycles
	s.MACs += pr.Stats.MACs
	s.LoadBytes += pr.Stats.LoadBytes
	s.StoreBytes += pr.Stats.StoreBytes
	busy, stalls := pr.Busy(), pr.Stalls()
	for q := range 3 {
		s.Busy[q] += busy[q]
		s.Stalls[q] += stalls[q]
	}
	s.MaxQueueWait = max(s.MaxQueueWait, pr.QueueWait)
	s.MaxRoundTrip = max(s.MaxRoundTrip, pr.RoundTrip())
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
