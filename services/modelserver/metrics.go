package modelserver

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/alidnn"
)

// Metrics are the Prometheus metrics of a Server, labelled by model and
// version as Triton's nv_inference_* are. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	queue    *prometheus.HistogramVec
	compute  *prometheus.HistogramVec
	batch    *prometheus.HistogramVec
	inflight *prometheus.GaugeVec
	engines  prometheus.Gauge
	reopens  prometheus.Counter
	device   *prometheus.CounterVec
}

// durationBuckets are the buckets of the time histograms: 50 µs to 3.3 s.
var durationBuckets = prometheus.ExponentialBuckets(0.00005, 2, 17)

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	mv := []string{"model", "version"}
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "modelserver_infer_requests_total",
			Help: "Infer requests by model, version, protocol (http or grpc) and HTTP status code of the answer (for gRPC, the code of the same error over HTTP); failures are the codes but 200.",
		}, []string{"model", "version", "protocol", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_duration_seconds",
			Help:    "Time from an infer request's arrival to its answer, by model and version.",
			Buckets: durationBuckets,
		}, mv),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_queue_seconds",
			Help:    "Time of successful requests from their admission by the model's queue to the start of their engine job (waiting for a job slot, held by dynamic batching), by model and version.",
			Buckets: durationBuckets,
		}, mv),
		compute: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_compute_seconds",
			Help:    "Time of successful requests from the start of their engine job to its results, by model and version.",
			Buckets: durationBuckets,
		}, mv),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "modelserver_infer_batch_size",
			Help:    "Requests that shared the engine job of each successful request, by model and version: above 1, requests were coalesced. Jobs of n requests are the count in that bucket over n.",
			Buckets: []float64{1, 2, 3, 4, 6, 8, 12, 16, 32, 64},
		}, mv),
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
		Help: "Engine time of successful requests, by model and version: a job's device time shared among the requests it ran.",
	}, mv)
	reg.MustRegister(m.requests, m.duration, m.queue, m.compute, m.batch, m.inflight, m.engines, m.reopens, m.device)
	return m
}

// answered counts a request answered with code, took from its arrival.
func (m *Metrics) answered(model, version, protocol string, code int, took time.Duration) {
	if m == nil {
		return
	}
	m.requests.WithLabelValues(model, version, protocol, strconv.Itoa(code)).Inc()
	m.duration.WithLabelValues(model, version).Observe(took.Seconds())
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

// ran records a successful run admitted at admitted and done at done: its
// queue and compute times, its job's size and its share of the job's
// device time.
func (m *Metrics) ran(model, version string, admitted, done time.Time, res *alidnn.Result) {
	if m == nil || res.Batch <= 0 {
		return
	}
	started := res.Started
	if started.Before(admitted) || started.After(done) { // a run without a job (no instructions)
		started = admitted
	}
	m.queue.WithLabelValues(model, version).Observe(started.Sub(admitted).Seconds())
	m.compute.WithLabelValues(model, version).Observe(done.Sub(started).Seconds())
	m.batch.WithLabelValues(model, version).Observe(float64(res.Batch))
	m.device.WithLabelValues(model, version).Add(float64(res.Stats.DeviceNS()) / float64(res.Batch) / 1e9)
}
