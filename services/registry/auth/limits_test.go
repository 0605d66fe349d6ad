package auth

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/clientip"
)

// fakeClock is a settable clock for lockouts.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *fakeClock { return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newLimitedStore(t *testing.T, l Limits) *Store {
	t.Helper()
	return newStore(t, WithLimits(l))
}

func from(addr string) context.Context {
	return clientip.NewContext(context.Background(), netip.MustParseAddr(addr))
}

func wantRetry(t *testing.T, err error, sentinel error, what string) int {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: %v, want %v", what, err, sentinel)
	}
	s, ok := RetryAfter(err)
	if !ok || s < 1 {
		t.Fatalf("%s: no Retry-After in %v", what, err)
	}
	return s
}

// TestAuthenticateLockout: wrong passwords lock the account after the free
// ones, the right password is refused while locked, and works once the
// lockout has passed.
func TestAuthenticateLockout(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	s := newLimitedStore(t, Limits{Now: clock.Now})
	if _, err := s.Create(ctx, "isv1", RoleISV, "s3cret"); err != nil {
		t.Fatal(err)
	}
	free := DefaultAccountBackoff.Free
	for i := 1; i <= 30; i++ {
		_, err := s.Authenticate(ctx, "isv1", fmt.Sprintf("guess-%d", i))
		if i <= free+1 {
			if err != ErrUnauthenticated { //nolint:errorlint // the very same value
				t.Fatalf("guess %d: %v, want ErrUnauthenticated", i, err)
			}
			continue
		}
		if s := wantRetry(t, err, ErrRateLimited, fmt.Sprintf("guess %d", i)); s != 1 {
			t.Fatalf("guess %d: Retry-After %d, want 1 (the first lockout)", i, s)
		}
	}
	if _, err := s.Authenticate(ctx, "isv1", "s3cret"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("right password while locked: %v, want ErrRateLimited", err)
	}
	// A locked name that does not exist looks the same (no enumeration).
	for i := 0; i <= free+1; i++ {
		_, _ = s.Authenticate(ctx, "nobody", "x")
	}
	if _, err := s.Authenticate(ctx, "nobody", "x"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("unknown account: %v, want ErrRateLimited", err)
	}

	clock.Advance(time.Second)
	// The next failure doubles the lockout.
	if _, err := s.Authenticate(ctx, "isv1", "guess-again"); err != ErrUnauthenticated { //nolint:errorlint
		t.Fatalf("after the lockout: %v", err)
	}
	if s := wantRetry(t, func() error { _, err := s.Authenticate(ctx, "isv1", "s3cret"); return err }(), ErrRateLimited, "second lockout"); s != 2 {
		t.Fatalf("second lockout: Retry-After %d, want 2", s)
	}
	clock.Advance(2 * time.Second)
	if a, err := s.Authenticate(ctx, "isv1", "s3cret"); err != nil || a.Name != "isv1" {
		t.Fatalf("right password after the lockout: %+v %v", a, err)
	}
	// The success reset the count: the free failures are free again.
	for i := 1; i <= free; i++ {
		if _, err := s.Authenticate(ctx, "isv1", "wrong"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("failure %d after a success: %v", i, err)
		}
	}
	if _, err := s.Authenticate(ctx, "isv1", "s3cret"); err != nil {
		t.Fatalf("right password within the free failures: %v", err)
	}
}

// TestLockoutCapAndForget: lockouts stop doubling at Max and a count is
// forgotten after a quiet Max; no lockout is permanent.
func TestLockoutCapAndForget(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	b := Backoff{Free: 2, Base: time.Second, Max: 10 * time.Second}
	s := newLimitedStore(t, Limits{Now: clock.Now, Account: b})
	if _, err := s.Create(ctx, "t1", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	var got []int
	for range 8 {
		for {
			_, err := s.Authenticate(ctx, "t1", "wrong")
			if sec, ok := RetryAfter(err); ok {
				got = append(got, sec)
				clock.Advance(time.Duration(sec) * time.Second)
				break
			}
		}
	}
	want := []int{1, 2, 4, 8, 10, 10, 10, 10}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lockouts %v, want %v", got, want)
	}
	// Quiet for Max after the lockout: forgotten, the right password works
	// and so do the free failures.
	clock.Advance(b.Max)
	for range b.Free {
		if _, err := s.Authenticate(ctx, "t1", "wrong"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("after forgetting: %v", err)
		}
	}
	if _, err := s.Authenticate(ctx, "t1", "pw"); err != nil {
		t.Fatalf("right password: %v", err)
	}
}

// TestSourceLockout: one address guessing across accounts is locked out,
// a success does not buy it more guesses, other addresses are unaffected.
func TestSourceLockout(t *testing.T) {
	ctx := context.Background()
	clock := newClock()
	s := newLimitedStore(t, Limits{Now: clock.Now, Source: Backoff{Free: 3}})
	for _, n := range []string{"a1", "a2", "a3", "a4", "a5"} {
		if _, err := s.Create(ctx, n, RoleTenant, "pw-"+n); err != nil {
			t.Fatal(err)
		}
	}
	attacker := from("203.0.113.9")
	for i, n := range []string{"a1", "a2", "a3", "a4"} {
		if _, err := s.Authenticate(attacker, n, "spray"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("spray %d: %v", i, err)
		}
	}
	if _, err := s.Authenticate(attacker, "a5", "pw-a5"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("locked source, right password: %v", err)
	}
	// Another address of the same IPv6 /64 is the same source; other
	// addresses are not.
	if _, err := s.Authenticate(from("198.51.100.1"), "a5", "pw-a5"); err != nil {
		t.Fatalf("other source: %v", err)
	}
	v6a, v6b := from("2001:db8:1:2::1"), from("2001:db8:1:2:ffff::9")
	for range 4 {
		_, _ = s.Authenticate(v6a, "a5", "wrong")
	}
	if _, err := s.Authenticate(v6b, "a1", "pw-a1"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("same /64: %v, want ErrRateLimited", err)
	}
	// A success from a source does not reset its count.
	clock.Advance(time.Second)
	if _, err := s.Authenticate(attacker, "a5", "pw-a5"); err != nil {
		t.Fatalf("after the lockout: %v", err)
	}
	if _, err := s.Authenticate(attacker, "a1", "spray"); err != ErrUnauthenticated { //nolint:errorlint
		t.Fatal(err)
	}
	if _, err := s.Authenticate(attacker, "a1", "pw-a1"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("source count reset by a success: %v", err)
	}
}

// TestConcurrentGuessesCounted: concurrent wrong passwords for one
// account count exactly as sequential ones: the free failures, one more,
// then the lockout, however many arrive at once.
func TestConcurrentGuessesCounted(t *testing.T) {
	ctx := context.Background()
	free := DefaultAccountBackoff.Free
	release := make(chan struct{})
	var started atomic.Int32
	var counting atomic.Bool
	s := newLimitedStore(t, Limits{Now: newClock().Now, OnHash: func(int, int64) {
		// The first free checks wait until all 40 have arrived.
		if counting.Load() && started.Add(1) <= int32(free) {
			<-release
		}
	}})
	if _, err := s.Create(ctx, "t1", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	counting.Store(true)
	errs := make(chan error, 40)
	for range 40 {
		go func() { _, err := s.Authenticate(ctx, "t1", "wrong"); errs <- err }()
	}
	for started.Load() < int32(free) {
		time.Sleep(time.Millisecond)
	}
	for {
		s.guard.mu.Lock()
		n := s.guard.queued
		s.guard.mu.Unlock()
		if n == 40-free || started.Load() > int32(free) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	var limited, failed int
	for range 40 {
		err := <-errs
		switch {
		case err == ErrUnauthenticated: //nolint:errorlint // the very same value
			failed++
		case errors.Is(err, ErrRateLimited):
			wantRetry(t, err, ErrRateLimited, "concurrent guess")
			limited++
		default:
			t.Fatalf("concurrent guess: %v", err)
		}
	}
	if n := started.Load(); n != int32(free+1) || failed != free+1 || limited != 40-free-1 {
		t.Fatalf("%d hashes ran, %d failed, %d refused; want %d, %d, %d", n, failed, limited, free+1, free+1, 40-free-1)
	}
}

// TestConcurrentLoginsQueued: many concurrent right passwords for one
// account all succeed; they queue rather than being refused.
func TestConcurrentLoginsQueued(t *testing.T) {
	ctx := context.Background()
	s := newLimitedStore(t, Limits{OnHash: func(int, int64) { time.Sleep(time.Millisecond) }})
	if _, err := s.Create(ctx, "t1", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 30 {
		wg.Go(func() {
			if _, err := s.Authenticate(from("192.0.2.1"), "t1", "pw"); err != nil {
				t.Errorf("concurrent login: %v", err)
			}
		})
	}
	wg.Wait()
}

// TestHashMemoryBudget: 40 concurrent wrong passwords never hash more at
// once than the memory budget allows.
func TestHashMemoryBudget(t *testing.T) {
	ctx := context.Background()
	cost := heapFactor * int64(testParams.Memory) << 10
	var mu sync.Mutex
	maxRunning, maxMemory, calls := 0, int64(0), 0
	s := newLimitedStore(t, Limits{HashMemory: 3 * cost, OnHash: func(running int, memory int64) {
		mu.Lock()
		maxRunning, maxMemory, calls = max(maxRunning, running), max(maxMemory, memory), calls+1
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // let the others pile up
	}})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			// Distinct accounts and sources: only the memory budget
			// stands between them.
			ctx := clientip.NewContext(ctx, netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}))
			if _, err := s.Authenticate(ctx, fmt.Sprintf("user%d", i), "wrong"); err != ErrUnauthenticated { //nolint:errorlint
				t.Errorf("check %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if calls != 40 || maxRunning > 3 || maxMemory > 3*cost {
		t.Fatalf("%d hashes, at most %d at once holding %d bytes; budget 3 × %d", calls, maxRunning, maxMemory, cost)
	}
}

// TestHashQueueBounded: with the budget taken, checks wait in a bounded
// queue for a bounded time, then ErrBusy; password changes share the
// budget.
func TestHashQueueBounded(t *testing.T) {
	ctx := context.Background()
	hold := make(chan struct{})
	held := make(chan struct{})
	var once sync.Once
	s := newLimitedStore(t, Limits{HashMemory: 1, MaxWaiting: 2, MaxWait: time.Hour, OnHash: func(int, int64) {
		once.Do(func() { close(held); <-hold })
	}})
	first := make(chan error, 1)
	go func() { _, err := s.Authenticate(from("192.0.2.1"), "u0", "x"); first <- err }()
	<-held
	// Two wait (until their contexts end); the third is refused at once.
	wctx, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 2)
	for i := range 2 {
		go func() {
			_, err := s.Authenticate(clientip.NewContext(wctx, netip.AddrFrom4([4]byte{192, 0, 2, byte(10 + i)})), fmt.Sprintf("w%d", i), "x")
			waiting <- err
		}()
	}
	for {
		s.guard.mu.Lock()
		n := s.guard.waiting
		s.guard.mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err := s.Authenticate(from("192.0.2.3"), "u3", "x")
	wantRetry(t, err, ErrBusy, "queue full")
	if _, err := s.Create(ctx, "new", RoleTenant, "pw"); !errors.Is(err, ErrBusy) {
		t.Fatalf("password hash with the queue full: %v", err)
	}
	cancel()
	for range 2 {
		wantRetry(t, <-waiting, ErrBusy, "waiter whose request ended")
	}
	close(hold)
	if err := <-first; err != ErrUnauthenticated { //nolint:errorlint
		t.Fatal(err)
	}
	// Refusals for want of memory are no failures: the accounts are free.
	if _, err := s.Create(ctx, "u3", RoleTenant, "pw"); err != nil {
		t.Fatal(err)
	}
	for range DefaultAccountBackoff.Free {
		_, _ = s.Authenticate(ctx, "w0", "x")
	}
	if _, err := s.Authenticate(ctx, "u3", "pw"); err != nil {
		t.Fatalf("after ErrBusy: %v", err)
	}

	// MaxWait bounds the wait.
	s2 := newLimitedStore(t, Limits{HashMemory: 1, MaxWait: time.Millisecond, OnHash: func(int, int64) { <-hold }})
	hold2 := make(chan struct{})
	s2.guard.cfg.OnHash = func(int, int64) { <-hold2 }
	go func() { _, _ = s2.Authenticate(ctx, "a", "x") }()
	for {
		s2.guard.mu.Lock()
		n := s2.guard.running
		s2.guard.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err = s2.Authenticate(ctx, "b", "x")
	wantRetry(t, err, ErrBusy, "MaxWait passed")
	close(hold2)
}

// TestTokensSkipKDF: API tokens are checked by their SHA-256 alone: no
// password hash runs, they work while the hashing budget is exhausted and
// while the account's password is locked out.
func TestTokensSkipKDF(t *testing.T) {
	ctx := context.Background()
	var hashes atomic.Int32
	hold := make(chan struct{})
	held := make(chan struct{}, 1)
	var blocking atomic.Bool
	s := newLimitedStore(t, Limits{HashMemory: 1, MaxWaiting: 1, Now: newClock().Now, OnHash: func(int, int64) {
		hashes.Add(1)
		if blocking.Load() {
			held <- struct{}{}
			<-hold
		}
	}})
	a, err := s.Create(ctx, "t1", RoleTenant, "pw")
	if err != nil {
		t.Fatal(err)
	}
	secret, err := s.IssueToken(ctx, a.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	for range DefaultAccountBackoff.Free + 1 {
		_, _ = s.Authenticate(ctx, "t1", "wrong")
	}
	if _, err := s.Authenticate(ctx, "t1", "pw"); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("password not locked: %v", err)
	}
	blocking.Store(true)
	go func() { _, _ = s.Authenticate(ctx, "other", "x") }()
	<-held
	before := hashes.Load()
	for range 100 {
		got, err := s.AuthenticateToken(ctx, secret)
		if err != nil || got.ID != a.ID {
			t.Fatalf("token while the budget is held and the password locked: %+v %v", got, err)
		}
	}
	if n := hashes.Load() - before; n != 0 {
		t.Fatalf("token checks ran %d password hashes", n)
	}
	close(hold)
}

func TestBackoffLockout(t *testing.T) {
	b := Backoff{Base: time.Second, Max: 15 * time.Minute}
	for n, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 10: 512 * time.Second,
		11: 15 * time.Minute, 40: 15 * time.Minute, 63: 15 * time.Minute, 1000: 15 * time.Minute} {
		if got := b.lockout(n); got != want {
			t.Errorf("lockout(%d) = %v, want %v", n, got, want)
		}
	}
	huge := Backoff{Base: time.Duration(1) << 62, Max: time.Duration(1<<63 - 1)}
	if got := huge.lockout(3); got != huge.Max {
		t.Errorf("overflowing lockout = %v", got)
	}
}

// TestTrackerBounded: the tracker never holds more than its bound, and
// entries without failures are not kept at all.
func TestTrackerBounded(t *testing.T) {
	g := newGuard(Limits{MaxTracked: 8, Now: newClock().Now})
	for i := range 100 {
		a, err := g.begin(context.Background(), fmt.Sprintf("user%d", i), netip.AddrFrom4([4]byte{10, 0, 0, byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			a.failed()
		} else {
			a.succeeded()
		}
	}
	if n, m := len(g.accounts.m), len(g.sources.m); n > 8 || m > 8 || g.accounts.lru.Len() != n {
		t.Fatalf("tracked %d accounts, %d sources", n, m)
	}
	a, _ := g.begin(context.Background(), "passing", netip.Addr{})
	a.succeeded()
	if _, ok := g.accounts.m["passing"]; ok {
		t.Fatal("an account without failures is kept")
	}
	// Over-long names share one bounded key.
	long := string(make([]byte, 10000))
	a, _ = g.begin(context.Background(), long, netip.Addr{})
	a.failed()
	for k := range g.accounts.m {
		if len(k) > 65 {
			t.Fatalf("key of %d bytes", len(k))
		}
	}
}
