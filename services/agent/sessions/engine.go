package sessions

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/shell"
)

// Defaults of Config.
const (
	defaultProgramBytes = 1 << 20
	defaultMaxJobs      = 1 << 16
	zeroChunk           = 1 << 20 // bytes per DMA write when zeroing
)

// Engine is the session manager of one chip. Run runs its scheduler.
type Engine struct {
	chip      Chip
	log       *slog.Logger
	progBytes uint64
	maxJobs   int
	memPart   uint64 // default Quota.Memory
	quotas    map[string]Quota
	defQuota  Quota
	zeros     []byte // zeroChunk zero bytes, never written
	// jobTimeout is Config.JobTimeout, 0 for none; watchdog aborts a job
	// that exceeds it (nil without a limit).
	jobTimeout time.Duration
	watchdog   *time.Timer
	sram       alidnn.Config

	// dirty is what the SRAMs may hold of owner's jobs, or of an unknown
	// earlier user when owner is nil; an empty set is clean SRAM. Used by
	// Run only.
	dirty sramSet
	owner *Session

	// base is the parent of every session's context; it ends when Run's
	// context does, aborting the running job.
	base context.Context
	stop context.CancelFunc

	mu       sync.Mutex
	jobDone  *sync.Cond // broadcast when a job ends
	ddr      arena      // free parts of [Base, Limit)
	windows  []int      // free window indexes
	tenants  map[string]*tenant
	sessions map[*Session]struct{}
	sched    scheduler
	running  *Session // whose job is in Exec, or nil
	run      runState // of the running job
	started  bool     // Run was called
	dead     bool     // Run returned: no more sessions
	activity Activity // Queued is counted when asked for
}

// New checks the chip (role magic) and the config and returns an Engine.
func New(cfg Config) (*Engine, error) {
	if cfg.Chip == nil {
		return nil, errors.New("sessions: no chip")
	}
	if magic, err := cfg.Chip.RoleRead32(alidnn.RegMagic); err != nil {
		return nil, fmt.Errorf("sessions: reading the role's magic: %w", err)
	} else if magic != alidnn.ID {
		return nil, fmt.Errorf("sessions: role magic %#08x, want %#08x: the AliDNN engine is not loaded", magic, alidnn.ID)
	}
	limit := cfg.Limit
	if limit == 0 {
		if cfg.DDRSize == 0 {
			return nil, errors.New("sessions: neither Limit nor DDRSize given")
		}
		limit = cfg.DDRSize
	}
	if cfg.DDRSize != 0 && limit > cfg.DDRSize {
		return nil, fmt.Errorf("sessions: limit %#x beyond the %d-byte DDR", limit, cfg.DDRSize)
	}
	base := roundUp(cfg.Base, regionAlign)
	limit &^= regionAlign - 1
	if base < cfg.Base || base >= limit {
		return nil, fmt.Errorf("sessions: empty DDR range [%#x, %#x)", cfg.Base, cfg.Limit)
	}
	windows := cfg.Windows
	if windows == nil {
		for n := 1; n < shell.Windows; n++ {
			windows = append(windows, n)
		}
	}
	seen := map[int]bool{}
	for _, n := range windows {
		if n < 0 || n >= shell.Windows || seen[n] {
			return nil, fmt.Errorf("sessions: window %d: not one of 0..%d, or listed twice", n, shell.Windows-1)
		}
		seen[n] = true
	}
	if len(windows) == 0 {
		return nil, errors.New("sessions: no windows")
	}
	e := &Engine{
		chip:      cfg.Chip,
		log:       cfg.Logger,
		progBytes: roundUp(cfg.ProgramBytes, regionAlign),
		maxJobs:   cfg.MaxJobs,
		quotas:    map[string]Quota{},
		defQuota:  cfg.DefaultQuota,
		zeros:     make([]byte, zeroChunk),
		sram:      cfg.Engine,
		ddr:       newArena(base, limit),
		windows:   slices.Clone(windows),
		tenants:   map[string]*tenant{},
		sessions:  map[*Session]struct{}{},
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	if e.progBytes == 0 {
		e.progBytes = defaultProgramBytes
	}
	if e.maxJobs <= 0 {
		e.maxJobs = defaultMaxJobs
	}
	if e.sram == (alidnn.Config{}) {
		e.sram = alidnn.Default
	}
	if c := e.sram; c.UopSize <= 0 || c.InpSize <= 0 || c.WgtSize <= 0 || c.AccSize <= 0 || c.ParamSize <= 0 ||
		c.DDRBytesPerCycle <= 0 || c.DDRLatency < 0 {
		return nil, fmt.Errorf("sessions: engine configuration %+v: SRAM sizes and DDR bandwidth must be positive", c)
	}
	// Whatever an earlier user of the chip left in SRAM: the first job
	// scrubs all of it.
	e.dirty = fullSRAM(&e.sram)
	part := (limit - base) / uint64(len(windows)) &^ (regionAlign - 1)
	if part <= e.progBytes+agentBytes {
		return nil, fmt.Errorf("sessions: %d bytes of DDR per window leave no room beside a %d-byte program area and the %d-byte agent area", part, e.progBytes, agentBytes)
	}
	e.memPart = part - e.progBytes - agentBytes
	for name, q := range cfg.Quotas {
		if err := checkQuota(q); err != nil {
			return nil, fmt.Errorf("sessions: quota of tenant %q: %w", name, err)
		}
		e.quotas[name] = q
	}
	if err := checkQuota(cfg.DefaultQuota); err != nil {
		return nil, fmt.Errorf("sessions: default quota: %w", err)
	}
	switch {
	case cfg.JobTimeout == 0:
		e.jobTimeout = DefaultJobTimeout
	case cfg.JobTimeout > 0:
		e.jobTimeout = cfg.JobTimeout
	}
	if e.jobTimeout > 0 {
		e.watchdog = time.AfterFunc(time.Hour, e.expire)
		e.watchdog.Stop()
	}
	e.jobDone = sync.NewCond(&e.mu)
	e.sched.init()
	e.base, e.stop = context.WithCancel(context.Background())
	// Windows the engine hands out start closed, whoever opened them.
	for _, n := range windows {
		if err := e.chip.SetWindow(n, 0, 0); err != nil {
			return nil, fmt.Errorf("sessions: closing window %d: %w", n, err)
		}
	}
	return e, nil
}

func checkQuota(q Quota) error {
	if !(q.Share >= 0 && q.Share <= 1) {
		return fmt.Errorf("share %v outside (0, 1]", q.Share)
	}
	return nil
}

// quota is the effective quota of a tenant.
func (e *Engine) quota(name string) Quota {
	q, ok := e.quotas[name]
	if !ok {
		q = e.defQuota
	}
	if q.Memory == 0 {
		q.Memory = e.memPart
	}
	if q.Share == 0 {
		q.Share = 1.0 / shell.Windows
	}
	return q
}

// tenant returns the record of a tenant, creating it. e.mu held.
func (e *Engine) tenant(name string) *tenant {
	t := e.tenants[name]
	if t == nil {
		t = &tenant{name: name, quota: e.quota(name)}
		e.tenants[name] = t
	}
	return t
}

// Open starts a session for tenant; the session owns one shell window.
// With no free window, or no free DDR for the tenant's region, it fails
// with ErrQuota.
func (e *Engine) Open(tenant string) (*Session, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.dead {
		return nil, fmt.Errorf("sessions: engine stopped: %w", ErrClosed)
	}
	t := e.tenant(tenant)
	if len(e.windows) == 0 {
		return nil, fmt.Errorf("sessions: tenant %q: all %d windows in use: %w", tenant, len(e.sessions), ErrQuota)
	}
	mem := roundUp(t.quota.Memory, regionAlign)
	size := agentBytes + mem + e.progBytes
	if mem < t.quota.Memory || size < mem {
		return nil, fmt.Errorf("sessions: tenant %q: memory quota %d too large: %w", tenant, t.quota.Memory, ErrQuota)
	}
	base, ok := e.ddr.alloc(size, regionAlign)
	if !ok {
		return nil, fmt.Errorf("sessions: tenant %q: no free %d-byte DDR region: %w", tenant, size, ErrQuota)
	}
	// The scrub reads zeros from the agent area, which DDR need not hold
	// yet: a region's first user gets what power-up left. Under e.mu, like
	// SetWindow; 68 KiB.
	agent := base + mem
	if err := e.zero(context.Background(), agent, agentBytes); err != nil {
		e.ddr.release(base, size)
		return nil, err
	}
	win := e.windows[0]
	// Under e.mu: SetWindow read-modifies-writes the shared enable register.
	if err := e.chip.SetWindow(win, base, base+size); err != nil {
		e.ddr.release(base, size)
		return nil, fmt.Errorf("sessions: opening window %d: %w", win, err)
	}
	e.windows = e.windows[1:]
	s := newSession(e, t, win, base, base+size, agent+agentBytes)
	t.sessions++
	e.sessions[s] = struct{}{}
	e.log.Debug("session opened", "tenant", tenant, "window", win, "base", base, "size", size)
	return s, nil
}

// Activity returns the engine's jobs run and busy time so far, and the jobs
// queued now.
func (e *Engine) Activity() Activity {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.activity
	for _, t := range e.sched.busy {
		a.Queued += len(t.queue)
	}
	return a
}

// Usage reports every tenant with a session or past engine time, by name.
func (e *Engine) Usage() []Usage {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Usage
	for _, t := range e.tenants {
		if t.sessions == 0 && t.jobs == 0 {
			continue
		}
		out = append(out, Usage{Tenant: t.name, Sessions: t.sessions, Memory: t.memory, BusyNS: t.busyNS, Jobs: t.jobs,
			Running: e.running != nil && e.running.t == t,
			Scrubs:  t.scrubs, ScrubNS: t.scrubNS, ScrubDeviceNS: t.scrubDeviceNS})
	}
	slices.SortFunc(out, func(a, b Usage) int { return cmp.Compare(a.Tenant, b.Tenant) })
	return out
}

// zero writes zeros over [addr, addr+n) in chunks of zeroChunk.
func (e *Engine) zero(ctx context.Context, addr, n uint64) error {
	for n > 0 {
		k := min(n, zeroChunk)
		if err := e.chip.Write(ctx, addr, e.zeros[:k]); err != nil {
			return fmt.Errorf("sessions: zeroing %d bytes at %#x: %w", k, addr, err)
		}
		addr, n = addr+k, n-k
	}
	return nil
}
