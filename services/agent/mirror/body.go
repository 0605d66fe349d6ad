package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// body is a mirror's response body: reads that stall longer than idle fail
// with ErrStalled, and its bytes are counted for the mirror.
type body struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	rc     io.ReadCloser
	idle   time.Duration
	timer  *time.Timer
	name   string
	m      *Metrics
	n      atomic.Int64 // Close may race a Read
	once   sync.Once
}

func newBody(ctx context.Context, cancel context.CancelCauseFunc, rc io.ReadCloser, idle time.Duration, name string, m *Metrics) *body {
	b := &body{ctx: ctx, cancel: cancel, rc: rc, idle: idle, name: name, m: m}
	b.timer = time.AfterFunc(idle, func() { cancel(fmt.Errorf("%w: nothing for %s", ErrStalled, idle)) })
	return b
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.rc.Read(p)
	b.timer.Reset(b.idle)
	b.n.Add(int64(n))
	if err != nil && err != io.EOF {
		if c := context.Cause(b.ctx); errors.Is(c, ErrStalled) {
			err = c
		}
		err = fmt.Errorf("registry mirror %s: %w", b.name, err)
	}
	return n, err
}

func (b *body) Close() error {
	err := b.rc.Close()
	b.once.Do(func() {
		b.timer.Stop()
		b.cancel(nil)
		b.m.bytes(b.name, b.n.Load())
	})
	return err
}
