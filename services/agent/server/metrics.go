package server

import (
	"crypto/tls"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/cache"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// collector reports slot states, sensors and cache usage at scrape time.
type collector struct {
	slots                                   *slots.Table
	cache                                   *cache.Cache
	state, temp, power, cacheUsed, cacheMax *prometheus.Desc
}

// NewCollector returns a Prometheus collector of the slots' states and
// sensors and of the node cache's usage.
func NewCollector(t *slots.Table, c *cache.Cache) prometheus.Collector {
	return &collector{slots: t, cache: c,
		state:     prometheus.NewDesc("faasd_slot_state", "1 for the state each slot is in.", []string{"slot", "state"}, nil),
		temp:      prometheus.NewDesc("faasd_chip_temperature_celsius", "Chip temperature.", []string{"slot"}, nil),
		power:     prometheus.NewDesc("faasd_chip_power_watts", "Chip power.", []string{"slot"}, nil),
		cacheUsed: prometheus.NewDesc("faasd_cache_used_bytes", "Bytes in the node cache.", nil, nil),
		cacheMax:  prometheus.NewDesc("faasd_cache_max_bytes", "Size limit of the node cache.", nil, nil),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.temp, c.power, c.cacheUsed, c.cacheMax} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	for i := range c.slots.Len() {
		sl, _ := c.slots.Slot(i)
		rec := c.slots.Record(i)
		label := fmt.Sprint(i)
		for _, s := range []agentapi.SlotState{agentapi.Cleared, agentapi.Loading, agentapi.Loaded, agentapi.Failed, agentapi.Busy} {
			v := 0.0
			if rec.State == s || (rec.State == "" && s == agentapi.Cleared) {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, label, string(s))
		}
		if se, err := sl.Chip.Sensors(); err == nil {
			ch <- prometheus.MustNewConstMetric(c.temp, prometheus.GaugeValue, se.TempC, label)
			ch <- prometheus.MustNewConstMetric(c.power, prometheus.GaugeValue, se.PowerW, label)
		}
	}
	used, max := c.cache.Usage()
	ch <- prometheus.MustNewConstMetric(c.cacheUsed, prometheus.GaugeValue, float64(used))
	ch <- prometheus.MustNewConstMetric(c.cacheMax, prometheus.GaugeValue, float64(max))
}

// engineCollector reports each slot's session engine: jobs run, busy time
// (its rate is the busy fraction) and queue depth.
type engineCollector struct {
	s                  *Server
	jobs, busy, queued *prometheus.Desc
}

// EngineCollector returns a Prometheus collector of the slots' session
// engines: faasd_slot_jobs_total, faasd_slot_engine_busy_seconds_total
// (rate() of it is the engine's busy fraction) and faasd_slot_queue_depth.
// Slots no session has used since faasd started are absent.
func (s *Server) EngineCollector() prometheus.Collector {
	return &engineCollector{s: s,
		jobs:   prometheus.NewDesc("faasd_slot_jobs_total", "Jobs the slot's engine ran.", []string{"slot"}, nil),
		busy:   prometheus.NewDesc("faasd_slot_engine_busy_seconds_total", "Host time the slot's engine spent running jobs; its rate is the busy fraction.", []string{"slot"}, nil),
		queued: prometheus.NewDesc("faasd_slot_queue_depth", "Jobs queued for the slot's engine.", []string{"slot"}, nil),
	}
}

func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.jobs
	ch <- c.busy
	ch <- c.queued
}

func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	for i, a := range c.s.hub.activity() {
		label := fmt.Sprint(i)
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.CounterValue, float64(a.Jobs), label)
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, a.Busy.Seconds(), label)
		ch <- prometheus.MustNewConstMetric(c.queued, prometheus.GaugeValue, float64(a.Queued), label)
	}
}

// LoadTLS reads a certificate and key for the TCP listener; TLS 1.3 only.
func LoadTLS(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server: TLS: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}
