package api

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// notifyChannel is the PostgreSQL channel an attachment change is
// announced on, so that long polls on every replica wake.
const notifyChannel = "faas_attachments"

// notify announces a change, delivered when tx commits.
func notify(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `select pg_notify($1, '')`, notifyChannel)
	return err
}

// Long-poll budgets: a waiting request holds a connection and a goroutine.
const (
	maxWaiters           = 1024
	maxWaitersPerAccount = 16
	maxWait              = 60 * time.Second
	// pollFallback bounds how late a waiter sees a change when the
	// notification listener is down.
	pollFallback = time.Second
)

// wake lets long polls wait for the next attachment change.
type wake struct {
	mu      sync.Mutex
	ch      chan struct{}
	total   int
	perAcct map[string]int
}

func newWake() *wake { return &wake{ch: make(chan struct{}), perAcct: map[string]int{}} }

// fire wakes every waiter.
func (w *wake) fire() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// enter takes a waiter's place for account; false when the budget is
// spent (the caller answers at once instead of waiting).
func (w *wake) enter(account string) (changed func() <-chan struct{}, leave func(), ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total >= maxWaiters || w.perAcct[account] >= maxWaitersPerAccount {
		return nil, nil, false
	}
	w.total++
	w.perAcct[account]++
	changed = func() <-chan struct{} {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ch
	}
	leave = func() {
		w.mu.Lock()
		w.total--
		if w.perAcct[account]--; w.perAcct[account] == 0 {
			delete(w.perAcct, account)
		}
		w.mu.Unlock()
	}
	return changed, leave, true
}

// poll calls done until it reports true, waiting for changes between
// calls, for at most wait; it returns done's last error. The channel of
// the next change is taken before each call, so that a change during the
// call is not missed.
func (a *API) poll(ctx context.Context, account string, wait time.Duration, done func() (bool, error)) error {
	if wait <= 0 {
		_, err := done()
		return err
	}
	changed, leave, admitted := a.wake.enter(account)
	if !admitted {
		_, err := done()
		return err
	}
	defer leave()
	t := time.NewTimer(min(wait, maxWait))
	defer t.Stop()
	for {
		ch := changed()
		if ok, err := done(); ok || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			return nil
		case <-ch:
		case <-time.After(pollFallback):
		}
	}
}

// listen wakes long polls on every change any replica announces, until ctx
// ends; it reconnects after errors.
func (a *API) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := func() error {
			conn, err := a.cfg.DB.Acquire(ctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(ctx, "listen "+notifyChannel); err != nil {
				return err
			}
			defer conn.Exec(context.WithoutCancel(ctx), "unlisten "+notifyChannel) //nolint:errcheck // the connection is released for reuse
			for {
				if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
					return err
				}
				a.wake.fire()
			}
		}()
		if ctx.Err() != nil {
			return
		}
		a.log.WarnContext(ctx, "api: attachment notifications", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// RunPool runs the accelerator pool's background work until ctx ends: the
// reaper of leases and silent nodes, and the listener that wakes long
// polls. Every replica runs it.
func (a *API) RunPool(ctx context.Context) {
	go a.listen(ctx)
	cfg := a.cfg.Attach.withDefaults()
	t := time.NewTicker(cfg.ReapInterval)
	defer t.Stop()
	for {
		if n, err := a.st.reap(ctx, cfg); err != nil && ctx.Err() == nil {
			a.log.WarnContext(ctx, "api: reaping attachments", "err", err)
		} else if n > 0 {
			a.log.InfoContext(ctx, "api: attachments ended", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
