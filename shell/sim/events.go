package sim

import (
	"context"
	"sync"
	"time"
)

// irqLine is one user interrupt line as the XDMA driver exposes it: a flag set
// by the interrupt and cleared by the reader, so interrupts that fire before
// a read coalesce into one event.
type irqLine struct {
	mu      sync.Mutex
	pending bool
	wake    chan struct{} // closed and replaced when the line fires
}

func newIRQLine() *irqLine { return &irqLine{wake: make(chan struct{})} }

func (l *irqLine) fire() {
	l.mu.Lock()
	l.pending = true
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// reset drops a pending event, as a power loss does.
func (l *irqLine) reset() {
	l.mu.Lock()
	l.pending = false
	l.mu.Unlock()
}

// ready blocks until the line has fired since the last wait, without clearing
// the flag, like poll(2) on the driver's events node.
func (l *irqLine) ready(ctx context.Context, closed <-chan struct{}) error {
	for {
		l.mu.Lock()
		pending, wake := l.pending, l.wake
		l.mu.Unlock()
		if pending {
			return nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-closed:
			return errClosed
		}
	}
}

// wait blocks until the line has fired since the last wait, then clears the
// flag. It gives up when ctx is done, at deadline (if not zero), or when
// closed is closed; it returns which of those happened.
func (l *irqLine) wait(ctx context.Context, deadline time.Time, closed <-chan struct{}) error {
	var timeout <-chan time.Time
	if !deadline.IsZero() {
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		timeout = t.C
	}
	for {
		l.mu.Lock()
		if l.pending {
			l.pending = false
			l.mu.Unlock()
			return nil
		}
		wake := l.wake
		l.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout:
			return errDeadline
		case <-closed:
			return errClosed
		}
	}
}
