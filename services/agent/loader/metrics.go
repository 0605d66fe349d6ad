package loader

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the loader's Prometheus metrics.
type Metrics struct {
	phase       *prometheus.HistogramVec
	pulled      prometheus.Counter
	cacheHits   prometheus.Counter
	cacheMisses prometheus.Counter
}

// NewMetrics registers the loader's metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		phase: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "faasd_load_phase_seconds", Help: "Duration of load phases.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"phase"}),
		pulled:      prometheus.NewCounter(prometheus.CounterOpts{Name: "faasd_pulled_bytes_total", Help: "Bytes pulled from the registry into the node cache."}),
		cacheHits:   prometheus.NewCounter(prometheus.CounterOpts{Name: "faasd_cache_hits_total", Help: "Layers found in the node cache."}),
		cacheMisses: prometheus.NewCounter(prometheus.CounterOpts{Name: "faasd_cache_misses_total", Help: "Layers pulled from the registry."}),
	}
	reg.MustRegister(m.phase, m.pulled, m.cacheHits, m.cacheMisses)
	return m
}

// fetched counts a layer found in the cache (hit) or pulled; m may be nil.
func (m *Metrics) fetched(hit bool, size int64) {
	switch {
	case m == nil:
	case hit:
		m.cacheHits.Inc()
	default:
		m.cacheMisses.Inc()
		m.pulled.Add(float64(size))
	}
}
