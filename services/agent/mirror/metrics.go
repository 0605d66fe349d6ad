package mirror

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the Prometheus metrics of mirrored pulls, labelled by mirror
// URL. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	served   *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faasd_registry_mirror_requests_total",
			Help: "Blob requests offered to a registry mirror, by result: served, fallback (to the next mirror or the registry), skipped (the request carried credentials not for mirrors).",
		}, []string{"mirror", "result"}),
		served: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "faasd_registry_mirror_bytes_total",
			Help: "Blob bytes read from a registry mirror (verified by digest after, by their consumer).",
		}, []string{"mirror"}),
	}
	reg.MustRegister(m.requests, m.served)
	return m
}

func (m *Metrics) result(mirror, result string) {
	if m != nil {
		m.requests.WithLabelValues(mirror, result).Inc()
	}
}

func (m *Metrics) bytes(mirror string, n int64) {
	if m != nil {
		m.served.WithLabelValues(mirror).Add(float64(n))
	}
}
