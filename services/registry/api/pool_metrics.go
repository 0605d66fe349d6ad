package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// PoolCollector returns the accelerator pool's metrics, read from the
// database at each scrape (so every replica reports the same figures):
//
//	faas_registry_attachments{state}              live attachments by state (pending, loading, ready)
//	faas_registry_attachments_ended_total{state}  attachments ended, by how (failed, detached, expired, lost)
//	faas_registry_attachments_unreleased          ended attachments whose node has not released them yet
func (a *API) PoolCollector() prometheus.Collector { return poolCollector{a} }

type poolCollector struct{ a *API }

var (
	liveDesc = prometheus.NewDesc("faas_registry_attachments",
		"Live attachments of the accelerator pool by state.", []string{"state"}, nil)
	endedDesc = prometheus.NewDesc("faas_registry_attachments_ended_total",
		"Attachments of the accelerator pool ended, by how: failed, detached, expired, lost.", []string{"state"}, nil)
	unreleasedDesc = prometheus.NewDesc("faas_registry_attachments_unreleased",
		"Ended attachments whose node has not yet reported their chips released (a node down, or busy clearing).", nil, nil)
)

func (poolCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- liveDesc
	ch <- endedDesc
	ch <- unreleasedDesc
}

func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts := map[poolapi.State]float64{}
	var unreleased float64
	rows, err := c.a.cfg.DB.Query(ctx, `select state, count(*), count(*) filter (where ended_at is not null and released_at is null)
		from attachments group by state`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(liveDesc, err)
		return
	}
	for rows.Next() {
		var st string
		var n, u float64
		if err := rows.Scan(&st, &n, &u); err != nil {
			rows.Close()
			ch <- prometheus.NewInvalidMetric(liveDesc, err)
			return
		}
		counts[poolapi.State(st)], unreleased = n, unreleased+u
	}
	rows.Close()
	for _, st := range []poolapi.State{poolapi.Pending, poolapi.Loading, poolapi.Ready} {
		ch <- prometheus.MustNewConstMetric(liveDesc, prometheus.GaugeValue, counts[st], string(st))
	}
	for _, st := range []poolapi.State{poolapi.Failed, poolapi.Detached, poolapi.Expired, poolapi.Lost} {
		ch <- prometheus.MustNewConstMetric(endedDesc, prometheus.CounterValue, counts[st], string(st))
	}
	ch <- prometheus.MustNewConstMetric(unreleasedDesc, prometheus.GaugeValue, unreleased)
}
