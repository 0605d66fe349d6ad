package auth

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Defaults of the zero values of Limits.
const (
	// DefaultHashMemory is the memory all concurrent password hashes may
	// cost together: two at DefaultParams (see Limits.HashMemory).
	DefaultHashMemory = 256 << 20
	// DefaultMaxWaiting password checks may wait for hashing memory, and
	// as many for their turn at an account or source; more are refused at
	// once.
	DefaultMaxWaiting = 64
	// DefaultMaxWait is how long a password check waits for either before
	// it is refused.
	DefaultMaxWait = 10 * time.Second
	// DefaultMaxTracked accounts and as many source networks have their
	// failures remembered; beyond that the least recently seen are
	// forgotten.
	DefaultMaxTracked = 65536
)

// DefaultAccountBackoff and DefaultSourceBackoff are the defaults of
// Limits.Account and Limits.Source: a source address may fail more often
// than one account (it may be a network of users), both then wait 1 s,
// 2 s, 4 s, … up to 15 minutes between tries.
var (
	DefaultAccountBackoff = Backoff{Free: 5, Base: time.Second, Max: 15 * time.Minute}
	DefaultSourceBackoff  = Backoff{Free: 20, Base: time.Second, Max: 15 * time.Minute}
)

// heapFactor is what one byte of argon2id memory costs the process: the
// hash allocates its memory afresh each time and Go's collector lets the
// heap grow to about twice what is live before it collects (GOGC=100). With
// a factor of 1, 40 concurrent wrong passwords under a 256 MiB budget still
// took a registry from 87 to 537 MiB.
const heapFactor = 2

var (
	// ErrRateLimited: too many failed password checks for this account or
	// from this source, or too many at once; try again later (RetryError
	// says when). The right password is refused too until then.
	ErrRateLimited = errors.New("auth: too many failed login attempts")
	// ErrBusy: too many password checks are waiting for hashing memory.
	ErrBusy = errors.New("auth: too many concurrent password checks")
)

// errCrowded refuses a check that found too many others of its account or
// source ahead of it.
var errCrowded = fmt.Errorf("%w: too many concurrent checks of this account or address", ErrRateLimited)

// RetryError is a refusal that may succeed later; it wraps ErrRateLimited
// or ErrBusy.
type RetryError struct {
	Err   error
	After time.Duration // when to try again, from now
}

func (e *RetryError) Error() string {
	s, _ := RetryAfter(e)
	return fmt.Sprintf("%v; retry in %ds", e.Err, s)
}

func (e *RetryError) Unwrap() error { return e.Err }

// RetryAfter returns the value of a Retry-After header for err, whole
// seconds rounded up and at least 1, when err is or wraps a *RetryError.
func RetryAfter(err error) (seconds int, ok bool) {
	var re *RetryError
	if !errors.As(err, &re) {
		return 0, false
	}
	s := math.Ceil(re.After.Seconds())
	return int(max(1, min(s, math.MaxInt32))), true
}

// Backoff is the lockout policy of one account or one source: after Free
// failed password checks without a success in between, each further failure
// locks it for Base, then twice that, and so on up to Max. While locked
// every check is refused, even with the right password. A success resets an
// account's count (not a source's: one good account must not buy a source
// more guesses at others). A count is forgotten once the lockout has ended
// and Max has passed without another failure. Zero fields take the values
// of DefaultAccountBackoff or DefaultSourceBackoff.
type Backoff struct {
	Free      int
	Base, Max time.Duration
}

func (b Backoff) withDefaults(d Backoff) Backoff {
	if b.Free <= 0 {
		b.Free = d.Free
	}
	if b.Base <= 0 {
		b.Base = d.Base
	}
	if b.Max <= 0 {
		b.Max = d.Max
	}
	b.Max = max(b.Max, b.Base)
	return b
}

// lockout is the lock after the n-th failure beyond Free (n ≥ 1).
func (b Backoff) lockout(n int) time.Duration {
	if n > 62 {
		return b.Max
	}
	d := b.Base << (n - 1)
	if d <= 0 || d > b.Max || d>>(n-1) != b.Base {
		return b.Max
	}
	return d
}

// Limits guards password checks (Store.Authenticate) against guessing and
// against memory exhaustion. Every zero value means the default named in
// its comment. The failure counts and lockouts are kept in PostgreSQL,
// shared by the registry's replicas; the hashing memory budget and the
// queues of concurrent checks are per process (they protect the process's
// own memory, and a queue holds requests this process serves).
type Limits struct {
	// HashMemory bounds the memory, in bytes, of the password hashes that
	// run at once (logins and password changes): each is charged twice its
	// argon2id memory, for the collector's headroom, and waits for its
	// share. A hash that needs more than HashMemory runs alone. Default
	// DefaultHashMemory.
	HashMemory int64
	// MaxWaiting bounds the checks waiting for memory (ErrBusy beyond),
	// and separately those waiting for concurrent checks of the same
	// account or source to end (ErrRateLimited beyond). Default
	// DefaultMaxWaiting.
	MaxWaiting int
	// MaxWait bounds how long one check waits for either. Default
	// DefaultMaxWait.
	MaxWait time.Duration
	// Account is the lockout policy per account name, Source per client
	// address (IPv6 by /64) as clientip.FromContext reports it; checks
	// without a client address in their context are limited per account
	// only. Defaults DefaultAccountBackoff and DefaultSourceBackoff.
	Account, Source Backoff
	// MaxTracked bounds the accounts and the sources remembered (each).
	// Default DefaultMaxTracked.
	MaxTracked int
	// Now is the clock of lockouts. Default time.Now.
	Now func() time.Time
	// OnHash, when set, is called as each password hash starts, with the
	// number of hashes then running (this one included) and the memory
	// they were charged. For metrics and tests.
	OnHash func(running int, memory int64)
}

func (l Limits) withDefaults() Limits {
	if l.HashMemory <= 0 {
		l.HashMemory = DefaultHashMemory
	}
	if l.MaxWaiting <= 0 {
		l.MaxWaiting = DefaultMaxWaiting
	}
	if l.MaxWait <= 0 {
		l.MaxWait = DefaultMaxWait
	}
	l.Account = l.Account.withDefaults(DefaultAccountBackoff)
	l.Source = l.Source.withDefaults(DefaultSourceBackoff)
	if l.MaxTracked <= 0 {
		l.MaxTracked = DefaultMaxTracked
	}
	if l.Now == nil {
		l.Now = time.Now
	}
	return l
}

// guard enforces Limits.
type guard struct {
	cfg Limits
	mem *semaphore.Weighted

	mu      sync.Mutex
	waiting int           // checks waiting for memory
	queued  int           // checks waiting in begin
	ended   chan struct{} // closed and replaced when a check ends
	// ends counts the checks ended, so that begin can tell a shared
	// snapshot read while one ended from a fresh one (see begin).
	ends     uint64
	running  int
	granted  int64
	accounts *tracker[string]
	sources  *tracker[netip.Prefix]
	// shared holds the failure counts and lockouts every replica sees;
	// nil: this process's memory only.
	shared *sharedLockouts
}

func newGuard(l Limits) *guard {
	l = l.withDefaults()
	return &guard{
		cfg:      l,
		mem:      semaphore.NewWeighted(l.HashMemory),
		ended:    make(chan struct{}),
		accounts: newTracker[string](l.Account, l.MaxTracked),
		sources:  newTracker[netip.Prefix](l.Source, l.MaxTracked),
	}
}

// hash runs f, which hashes with memKiB KiB of memory, once its memory fits
// the budget: at once if it does, else after waiting in a bounded queue for
// at most MaxWait.
func (g *guard) hash(ctx context.Context, memKiB uint32, f func()) error {
	cost := min(heapFactor*int64(memKiB)<<10, g.cfg.HashMemory)
	if !g.mem.TryAcquire(cost) {
		g.mu.Lock()
		if g.waiting >= g.cfg.MaxWaiting {
			g.mu.Unlock()
			return &RetryError{Err: ErrBusy, After: time.Second}
		}
		g.waiting++
		g.mu.Unlock()
		wctx, cancel := context.WithTimeout(ctx, g.cfg.MaxWait)
		err := g.mem.Acquire(wctx, cost)
		cancel()
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
		if err != nil {
			if ctx.Err() != nil {
				err = context.Cause(ctx)
			}
			return &RetryError{Err: fmt.Errorf("%w: %w", ErrBusy, err), After: time.Second}
		}
	}
	g.mu.Lock()
	g.running++
	g.granted += cost
	running, granted := g.running, g.granted
	g.mu.Unlock()
	if g.cfg.OnHash != nil {
		g.cfg.OnHash(running, granted)
	}
	defer func() {
		g.mu.Lock()
		g.running--
		g.granted -= cost
		g.mu.Unlock()
		g.mem.Release(cost)
	}()
	f()
	return nil
}

// sourceKey is the network a client address is counted under: the address
// itself for IPv4, its /64 for IPv6 (one subscriber's usual allocation).
func sourceKey(a netip.Addr) netip.Prefix {
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.Prefix(64)
	return p
}

// attempt is one admitted password check; exactly one of succeeded, failed
// or abandoned ends it.
type attempt struct {
	g      *guard
	ctx    context.Context // of the check, without its cancellation
	name   string          // the account key
	source string          // the source key; "" when unknown
	acct   *entry[string]
	src    *entry[netip.Prefix]
	closed bool
}

// begin admits a password check of account name from source (invalid: not
// known). It refuses it with a *RetryError wrapping ErrRateLimited while
// either is locked out. While as many checks of either are running as it
// may still fail, it waits for one to end (they may succeed), at most
// MaxWait and with at most MaxWaiting others, so that concurrent guesses
// count exactly as sequential ones and concurrent logins are merely queued.
func (g *guard) begin(ctx context.Context, name string, source netip.Addr) (*attempt, error) {
	if len(name) > 64 {
		name = name[:65] // no account has a longer name; bounds the key
	}
	var srcKey netip.Prefix
	var srcName string
	if source.IsValid() {
		srcKey = sourceKey(source)
		srcName = srcKey.String()
	}
	var timeout <-chan time.Time
	for {
		now := g.cfg.Now()
		var sharedAcct, sharedSrc lockState
		var ends uint64
		if g.shared != nil {
			g.mu.Lock()
			ends = g.ends
			g.mu.Unlock()
			var err error
			if sharedAcct, sharedSrc, err = g.shared.read(ctx, name, srcName, now); err != nil {
				return nil, err
			}
		}
		g.mu.Lock()
		if g.shared != nil && g.ends != ends {
			// A check of this process ended while the snapshot was read:
			// its failure is in memory but maybe not in the snapshot,
			// which must not overwrite it. Read again.
			g.mu.Unlock()
			continue
		}
		a := &attempt{g: g, ctx: context.WithoutCancel(ctx), name: name, acct: g.accounts.get(name, now)}
		if g.shared != nil {
			g.accounts.adopt(a.acct, sharedAcct)
		}
		if source.IsValid() {
			a.src = g.sources.get(srcKey, now)
			a.source = srcName
			if g.shared != nil {
				g.sources.adopt(a.src, sharedSrc)
			}
		}
		locked := g.accounts.locked(a.acct, now)
		full := g.accounts.full(a.acct)
		if a.src != nil {
			locked = max(locked, g.sources.locked(a.src, now))
			full = full || g.sources.full(a.src)
		}
		if locked == 0 && !full {
			a.acct.inflight++
			if a.src != nil {
				a.src.inflight++
			}
			g.mu.Unlock()
			return a, nil
		}
		g.accounts.release(a.acct)
		if a.src != nil {
			g.sources.release(a.src)
		}
		if locked > 0 {
			g.mu.Unlock()
			return nil, &RetryError{Err: ErrRateLimited, After: locked}
		}
		if g.queued >= g.cfg.MaxWaiting {
			g.mu.Unlock()
			return nil, &RetryError{Err: errCrowded, After: time.Second}
		}
		g.queued++
		ended := g.ended
		g.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(g.cfg.MaxWait)
			defer t.Stop()
			timeout = t.C
		}
		var err error
		select {
		case <-ended:
		case <-timeout:
			err = &RetryError{Err: errCrowded, After: time.Second}
		case <-ctx.Done():
			err = &RetryError{Err: fmt.Errorf("%w: %w", ErrBusy, context.Cause(ctx)), After: time.Second}
		}
		g.mu.Lock()
		g.queued--
		g.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

func (a *attempt) end(ok, counts bool) {
	if a.closed {
		return
	}
	a.closed = true
	g := a.g
	now := g.cfg.Now()
	if g.shared != nil && (ok || counts) {
		g.record(a, ok, now)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.ended) // wake the checks waiting in begin
	g.ended = make(chan struct{})
	g.ends++
	a.acct.inflight--
	switch {
	case ok:
		a.acct.reset()
	case counts:
		g.accounts.fail(a.acct, now)
	}
	g.accounts.release(a.acct)
	if a.src != nil {
		a.src.inflight--
		if counts && !ok {
			g.sources.fail(a.src, now)
		}
		g.sources.release(a.src)
	}
}

func (a *attempt) succeeded() { a.end(true, true) }
func (a *attempt) failed()    { a.end(false, true) }

// abandoned ends a check that never compared a password (a database error,
// no hashing memory): it counts for nothing.
func (a *attempt) abandoned() { a.end(false, false) }

// entry is the state of one account or source.
type entry[K comparable] struct {
	key         K
	elem        *list.Element
	failures    int       // since the last success or forgetting
	inflight    int       // admitted checks not yet ended
	lockedUntil time.Time // refuse until then
	forgetAt    time.Time // reset failures when reached with nothing in flight
}

func (e *entry[K]) reset() { e.failures, e.lockedUntil, e.forgetAt = 0, time.Time{}, time.Time{} }

// tracker is a bounded map of entries, least recently used evicted first.
type tracker[K comparable] struct {
	b   Backoff
	max int
	m   map[K]*entry[K]
	lru *list.List // front: most recently used
}

func newTracker[K comparable](b Backoff, max int) *tracker[K] {
	return &tracker[K]{b: b, max: max, m: make(map[K]*entry[K]), lru: list.New()}
}

// get returns k's entry, creating it (and evicting the least recently used
// one when full), with failures forgotten when their time has come.
func (t *tracker[K]) get(k K, now time.Time) *entry[K] {
	if e, ok := t.m[k]; ok {
		t.lru.MoveToFront(e.elem)
		if e.failures > 0 && e.inflight == 0 && !now.Before(e.forgetAt) {
			e.reset()
		}
		return e
	}
	if len(t.m) >= t.max {
		old := t.lru.Remove(t.lru.Back()).(*entry[K])
		delete(t.m, old.key)
	}
	e := &entry[K]{key: k}
	e.elem = t.lru.PushFront(e)
	t.m[k] = e
	return e
}

// locked returns how long e's lockout lasts from now (0: none).
func (t *tracker[K]) locked(e *entry[K], now time.Time) time.Duration {
	if now.Before(e.lockedUntil) {
		return e.lockedUntil.Sub(now)
	}
	return 0
}

// full reports whether as many checks of e are running as it may still fail
// before a lockout (one, once it was locked before).
func (t *tracker[K]) full(e *entry[K]) bool {
	return e.inflight >= max(1, t.b.Free-e.failures)
}

func (t *tracker[K]) fail(e *entry[K], now time.Time) {
	e.failures++
	if n := e.failures - t.b.Free; n > 0 {
		e.lockedUntil = now.Add(t.b.lockout(n))
	}
	e.forgetAt = maxTime(e.lockedUntil, now).Add(t.b.Max)
}

// release drops e when it holds nothing worth remembering.
func (t *tracker[K]) release(e *entry[K]) {
	if e.failures == 0 && e.inflight == 0 && t.m[e.key] == e {
		t.lru.Remove(e.elem)
		delete(t.m, e.key)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
