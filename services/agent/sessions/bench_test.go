package sessions_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// reportLatency reports the median and 99th percentile of ds.
func reportLatency(b *testing.B, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	slices.Sort(ds)
	b.ReportMetric(float64(ds[len(ds)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(ds[len(ds)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkFinishRoundTrip is the session path of an SDK job round trip:
// Submit of a FINISH-only program, scheduling, alidnn.Exec on the
// simulated engine, and the completion received from the channel.
func BenchmarkFinishRoundTrip(b *testing.B) {
	e, _ := newEngine(b, sessions.Config{})
	s := open(b, e, "bench")
	p := program(b, s, finishOnly)
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if err := s.Submit(p, uint64(i)); err != nil {
			b.Fatal(err)
		}
		c := <-s.Completions()
		ds = append(ds, time.Since(start))
		if c.Err != nil {
			b.Fatal(c.Err)
		}
	}
	b.StopTimer()
	reportLatency(b, ds)
}

// BenchmarkExecFloor runs the same FINISH-only program with alidnn.Exec
// straight on the chip: the floor the round trip is measured against.
func BenchmarkExecFloor(b *testing.B) {
	chip := newChip(b)
	const win = 1
	if err := chip.SetWindow(win, 0, 1<<20); err != nil {
		b.Fatal(err)
	}
	code, err := isa.EncodeProgram(finishOnly)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := chip.Write(ctx, 0, code); err != nil {
		b.Fatal(err)
	}
	r := alidnn.Run{Insns: 0, Count: 1, Window: win}
	ds := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := alidnn.Exec(ctx, chip, r); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	b.StopTimer()
	reportLatency(b, ds)
}
