package server

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/fpga-faas/faas/services/registry/gc"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// gcFirstDelay bounds the wait for the first scheduled collection, so that
// a registry restarted more often than Config.GCInterval still collects.
const gcFirstDelay = 5 * time.Minute

// CollectGarbage runs one garbage collection (see package gc) on the
// server's database and blob store. A zero opt.GracePeriod means
// Config.GCGracePeriod, a nil opt.Logger the server's logger. It fails with
// an error wrapping meta.ErrGCBusy when another collection is running.
func (s *Server) CollectGarbage(ctx context.Context, opt gc.Options) (gc.Report, error) {
	if opt.GracePeriod == 0 {
		opt.GracePeriod = s.cfg.GCGracePeriod
	}
	if opt.Logger == nil {
		opt.Logger = s.log
	}
	rep, err := gc.Run(ctx, s.meta, s.blobs, opt)
	if opt.DryRun {
		return rep, err
	}
	m := s.metrics
	m.gcRemoved.Add(float64(len(rep.Blobs)))
	m.gcFreed.Add(float64(rep.FreedBytes))
	switch {
	case errors.Is(err, meta.ErrGCBusy):
		m.gcRuns.WithLabelValues("busy").Inc()
	case err != nil:
		m.gcRuns.WithLabelValues("error").Inc()
	default:
		m.gcRuns.WithLabelValues("ok").Inc()
		m.gcLastSuccess.SetToCurrentTime()
	}
	return rep, err
}

// collectPeriodically runs CollectGarbage on Config.GCInterval until ctx
// ends.
func (s *Server) collectPeriodically(ctx context.Context) {
	if s.cfg.GCInterval <= 0 {
		return
	}
	t := time.NewTimer(min(s.cfg.GCInterval, gcFirstDelay))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		_, err := s.CollectGarbage(ctx, gc.Options{})
		switch {
		case errors.Is(err, meta.ErrGCBusy):
			s.log.DebugContext(ctx, "gc: another collection is running; skipping this one")
		case err != nil && ctx.Err() == nil:
			s.log.ErrorContext(ctx, "gc failed", slog.Any("err", err))
		}
		t.Reset(s.cfg.GCInterval)
	}
}
