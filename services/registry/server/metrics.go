package server

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// metrics are the server's Prometheus metrics, in a registry of its own.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec

	storageRefused prometheus.Counter

	gcRuns        *prometheus.CounterVec
	gcRemoved     prometheus.Counter
	gcFreed       prometheus.Counter
	gcLastSuccess prometheus.Gauge
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faas_registry_http_requests_total",
			Help: "HTTP requests by route class, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "faas_registry_http_request_duration_seconds",
			Help:    "HTTP request latency by route class and method.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10), // 1 ms … 262 s
		}, []string{"route", "method"}),
		storageRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faas_registry_storage_refused_writes_total",
			Help: "Requests answered 507 Insufficient Storage: writes the blob store refused for want of space.",
		}),
		gcRuns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faas_registry_gc_runs_total",
			Help: "Garbage collections (not dry runs) by result: ok, error, or busy (another collection held the lock).",
		}, []string{"result"}),
		gcRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faas_registry_gc_removed_blobs_total",
			Help: "Blobs removed by garbage collection.",
		}),
		gcFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "faas_registry_gc_freed_bytes_total",
			Help: "Bytes of the blobs removed by garbage collection.",
		}),
		gcLastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "faas_registry_gc_last_success_timestamp_seconds",
			Help: "Unix time of the end of the last successful garbage collection of this process; 0: none yet.",
		}),
	}
	for _, r := range []string{"ok", "error", "busy"} {
		m.gcRuns.WithLabelValues(r)
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.requests, m.duration, m.storageRefused, m.gcRuns, m.gcRemoved, m.gcFreed, m.gcLastSuccess)
	return m
}

// watchSpace registers faas_registry_storage_full, which asks check (the
// blob store's blob.SpaceChecker) on every scrape.
func (m *metrics) watchSpace(check func(context.Context) error, timeout time.Duration) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "faas_registry_storage_full",
		Help: "1 while the blob store reports itself full (see /readyz), else 0.",
	}, func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		if errors.Is(check(ctx), blob.ErrStorageFull) {
			return 1
		}
		return 0
	}))
}
