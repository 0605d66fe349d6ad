package modelserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the Prometheus metrics of a Server, labelled by model. A nil
// *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	batch    *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelserver_infer_requests_total",
			Help: "Infer requests by model, protocol (http or grpc) and HTTP status code of the answer (for gRPC, the code of the same error over HTTP).",
		}, []string{"model", "protocol", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_duration_seconds",
			Help:    "Time from an infer request's arrival to its answer, by model.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"model"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_batch_size",
			Help:    "Requests that shared the engine job of each successful request, by model: above 1, requests were coalesced.",
			Buckets: []float64{1, 2, 4, 8, 16, 32, 64},
		}, []string{"model"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "modelserver_infer_inflight",
			Help: "Infer requests of a model admitted by its queue, running or waiting.",
		}, []string{"model"}),
	}
	reg.MustRegister(m.requests, m.duration, m.batch, m.inflight)
	return m
}

func (m *Metrics) answered(model, protocol string, code int, took time.Duration, batch int) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(model, protocol, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(model).Observe(took.Seconds())
	if batch > 0 {
		m.batch.WithLabelValues(model).Observe(float64(batch))
	}
}

// admitted adds d to a model's requests in flight.
func (m *Metrics) admitted(model string, d float64) {
	if m != nil {
		m.inflight.WithLabelValues(model).Add(d)
	}
}
