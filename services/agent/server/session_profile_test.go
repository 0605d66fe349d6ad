package server_test

import (
	"context"
	"crypto/tls"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/prometheus/client_golang/prometheus"
)

// TestJobProfile: a job's profile comes back on both paths, with the
// agent's queue wait and engine time, the engine's counters and the token
// stalls, and the session sums and keeps it.
func TestJobProfile(t *testing.T) {
	a := startSessAgent(t, sessOptions{tls: true})
	for _, path := range []struct {
		name   string
		target string
		opts   []faas.Option
	}{
		{"local", a.socket, nil},
		{"tls", "https://" + a.tcp, []faas.Option{faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})}},
	} {
		t.Run(path.name, func(t *testing.T) {
			ctx := context.Background()
			d := openDevice(t, path.target, "alice", 0, path.opts...)
			d.KeepProfiles(2)
			buf, err := d.Alloc(ctx, 4096)
			if err != nil {
				t.Fatal(err)
			}
			// The store waits for the load's token: a stall of the store
			// queue, the length of the load.
			p, err := d.Program(ctx, []isa.Insn{
				{Op: isa.OpLoad, Mem: isa.MemInp, DType: isa.Int8, DRAM: buf.Addr(), YSize: 1, XSize: 64, XStride: 64, PushNext: true},
				{Op: isa.OpNop, NopQueue: isa.QueueCompute, PopPrev: true, PushNext: true},
				{Op: isa.OpStore, Mem: isa.MemAcc, DType: isa.Int8, DRAM: buf.Addr() + 2048, YSize: 1, XSize: 1, XStride: 1, PopPrev: true},
				{Op: isa.OpFinish, JobID: 7},
			})
			if err != nil {
				t.Fatal(err)
			}
			const jobs = 3
			for range jobs {
				j, err := d.Queue().Submit(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := j.Wait(ctx); err != nil {
					t.Fatal(err)
				}
				pr, ok := j.Profile()
				if !ok || pr.Job != j.ID() || pr.Failed {
					t.Fatalf("profile %+v ok=%v", pr, ok)
				}
				if pr.QueueWait <= 0 || pr.Engine <= 0 || pr.RoundTrip() < pr.Engine {
					t.Errorf("queue wait %v, engine %v, round trip %v", pr.QueueWait, pr.Engine, pr.RoundTrip())
				}
				if pr.Stats.Cycles == 0 || pr.Device() <= 0 || pr.Stats.LoadBytes < 64 || pr.Stats.StoreBytes == 0 {
					t.Errorf("counters %+v", pr.Stats)
				}
				if s := pr.Stalls(); s[0] != 0 || s[2] == 0 {
					t.Errorf("stalls %v: want none on the load queue and some on the store queue", s)
				}
			}
			sum := d.Profile()
			if sum.Jobs != jobs || sum.Failed != 0 || sum.Cycles == 0 || sum.Stalls[2] == 0 || sum.MaxRoundTrip < sum.RoundTrip/jobs {
				t.Errorf("session sums %+v", sum)
			}
			if kept := d.Profiles(); len(kept) != 2 || kept[0].Job >= kept[1].Job {
				t.Errorf("kept %d profiles, want the last 2 in order", len(kept))
			}
			// With the SDK's side off, faasd's numbers still come, and the
			// session sums stay as they were.
			d.SetProfiling(false)
			j, err := d.Queue().Submit(ctx, p)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := j.Wait(ctx); err != nil {
				t.Fatal(err)
			}
			if pr, _ := j.Profile(); !pr.Submitted.IsZero() || pr.Engine <= 0 || pr.Stats.Cycles == 0 || d.Profile().Jobs != jobs {
				t.Errorf("profiling off: profile %+v, session jobs %d", pr, d.Profile().Jobs)
			}
		})
	}
}

// TestEngineMetrics: the slot's jobs, busy time and queue depth reach
// Prometheus.
func TestEngineMetrics(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()
	d := openDevice(t, a.socket, "alice", 1)
	p, err := d.Program(ctx, finishOnly)
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		j, err := d.Queue().Submit(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := j.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(a.srv.EngineCollector())
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			slot := m.GetLabel()[0].GetValue()
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			got[mf.GetName()+"{slot="+slot+"}"] = v
		}
	}
	if got["faasd_slot_jobs_total{slot=1}"] != 5 || got["faasd_slot_engine_busy_seconds_total{slot=1}"] <= 0 || got["faasd_slot_queue_depth{slot=1}"] != 0 {
		t.Errorf("metrics %v: want slot 1 with 5 jobs, some busy time, nothing queued", got)
	}
	if _, ok := got["faasd_slot_jobs_total{slot=0}"]; ok {
		t.Errorf("slot 0, which ran no session, has metrics: %v", got)
	}
}
