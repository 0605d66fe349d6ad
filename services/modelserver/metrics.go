package modelserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// Metrics are the Prometheus metrics of a Server, labelled by model. A nil
// *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	batch    *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	engines  prometheus.Gauge
	reopens  prometheus.Counter
	device   *prometheus.CounterVec
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
	m.engines = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "modelserver_engines_up",
		Help: "Engines up: slots and pool attachments open, with the models loaded on them.",
	})
	m.reopens = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "modelserver_engine_reopens_total",
		Help: "Engines opened again (a slot reopened, a pool attachment made again) after they failed.",
	})
	m.device = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "modelserver_device_seconds_total",
		Help: "Engine time of successful requests, by model: a job's device time shared among the requests it ran.",
	}, []string{"model"})
	reg.MustRegister(m.requests, m.duration, m.batch, m.inflight, m.engines, m.reopens, m.device)
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

// engineUp adds d to the engines up.
func (m *Metrics) engineUp(d float64) {
	if m != nil {
		m.engines.Add(d)
	}
}

// reopened counts an engine opened again.
func (m *Metrics) reopened() {
	if m != nil {
		m.reopens.Inc()
	}
}

// ranOn adds a request's share of its job's device time to its model's.
func (m *Metrics) ranOn(model string, res *alidnn.Result) {
	if m != nil && res.Batch > 0 {
		m.device.WithLabelValues(model).Add(float64(res.Stats.DeviceNS()) / float64(res.Batch) / 1e9)
	}
}
