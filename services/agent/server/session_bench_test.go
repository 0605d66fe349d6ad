package server_test

import (
	"context"
	"crypto/tls"
	"slices"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

// BenchmarkJobRoundTrip submits a FINISH-only program and waits for it,
// from this process to an agent in another,
// one job at a time, over the local shared-memory path: SDK → submission
// ring → agent → session engine → simulated chip → completion ring → SDK.
// p50-ns and p99-ns are of the single round trips; the target is p50 ≤ 5 µs
// and p99 ≤ 50 µs. BenchmarkJobExecFloor is the same program run by
// alidnn.Exec on the simulated chip directly, in the same run. (The session
// engine's own round trip, in process and without transport, is
// services/agent/sessions' BenchmarkFinishRoundTrip; it lies between the
// two.)
func BenchmarkJobRoundTrip(b *testing.B) { benchJobRoundTrip(b, true) }

// BenchmarkJobRoundTripUnprofiled is BenchmarkJobRoundTrip with the SDK's
// side of profiling off (Device.SetProfiling(false)): against it, the
// profiled round trip shows what profiling costs a job. faasd's side (one
// clock reading and 20 bytes of the completion) stays in both.
func BenchmarkJobRoundTripUnprofiled(b *testing.B) { benchJobRoundTrip(b, false) }

// BenchmarkProfilingOverhead alternates blocks of 500 jobs with the SDK's
// profiling on and off on one session, so that a machine whose load changes
// during the run weighs on both alike; x-unprofiled is the ratio of their
// p50 round trips.
func BenchmarkProfilingOverhead(b *testing.B) {
	d := openDevice(b, benchAgent(b), "alice", 0)
	p := warmFinish(b, d)
	var lat [2][]time.Duration // off, on
	b.ResetTimer()
	for i := range b.N {
		on := (i/500)%2 == 1
		d.SetProfiling(on)
		k := 0
		if on {
			k = 1
		}
		lat[k] = append(lat[k], timeJob(b, d, p))
	}
	b.StopTimer()
	if len(lat[0]) == 0 || len(lat[1]) == 0 {
		return // too few jobs for both
	}
	p50 := func(l []time.Duration) float64 {
		slices.Sort(l)
		return float64(l[len(l)/2].Nanoseconds())
	}
	off, on := p50(lat[0]), p50(lat[1])
	b.ReportMetric(on, "profiled-p50-ns")
	b.ReportMetric(off, "unprofiled-p50-ns")
	b.ReportMetric(on/off, "x-unprofiled")
}

func benchJobRoundTrip(b *testing.B, profiled bool) {
	d := openDevice(b, benchAgent(b), "alice", 0)
	d.SetProfiling(profiled)
	p := warmFinish(b, d)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, timeJob(b, d, p))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// warmFinish stores the FINISH-only program on d and runs it 1000 times,
// to warm the agent's poller and the engine.
func warmFinish(b *testing.B, d *faas.Device) *faas.Program {
	p, err := d.Program(context.Background(), finishOnly)
	if err != nil {
		b.Fatal(err)
	}
	for range 1000 {
		timeJob(b, d, p)
	}
	return p
}

// timeJob runs p once on d and returns the time from Submit to the end
// of Wait.
func timeJob(b *testing.B, d *faas.Device, p *faas.Program) time.Duration {
	ctx := context.Background()
	t0 := time.Now()
	j, err := d.Queue().Submit(ctx, p)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := j.Wait(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
	if testing.Verbose() {
		for _, q := range []int{900, 950, 990, 999} {
			b.Logf("p%.1f %v", float64(q)/10, lat[len(lat)*q/1000])
		}
	}
}

// BenchmarkJobExecFloor runs the FINISH-only program with alidnn.Exec on a
// simulated chip: the floor of BenchmarkJobRoundTrip (no session, no
// scheduler, no transport).
func BenchmarkJobExecFloor(b *testing.B) {
	a := startSessAgent(b, sessOptions{})
	chip := a.chips[1]
	ctx := context.Background()
	code, err := isa.EncodeProgram(finishOnly)
	if err != nil {
		b.Fatal(err)
	}
	const at = 1 << 20
	if err := chip.Write(ctx, at, code); err != nil {
		b.Fatal(err)
	}
	if err := chip.SetWindow(1, 0, chip.DDRSize()); err != nil {
		b.Fatal(err)
	}
	run := alidnn.Run{Insns: at, Count: len(finishOnly), Window: 1}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := alidnn.Exec(ctx, chip, run); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

const mib64 = 64 << 20

// benchAgent starts an agent in a child process, as faasd runs apart from
// its tenants, and returns its socket.
func benchAgent(b *testing.B) string {
	k := startChild(b, "agent", "", "", 0)
	return k.expect("READY", time.Minute)[0]
}

// BenchmarkBuffer64MiB writes 64 MiB to a device buffer and reads it back
// through the SDK on the local path (copy into shared memory, DMA by the
// agent; the reverse). SetBytes counts both directions, 128 MiB per op;
// BenchmarkMemcpy64MiBSDK is the floor measured in the same run. The target
// is at least half of memcpy's bandwidth.
func BenchmarkBuffer64MiB(b *testing.B) {
	d := openDevice(b, benchAgent(b), "alice", 0)
	ctx := context.Background()
	buf, err := d.Alloc(ctx, mib64)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := make([]byte, mib64), make([]byte, mib64)
	for i := range src {
		src[i] = byte(i)
	}
	// Warm: the first pass faults in the staging memory on both sides and
	// the simulated DDR pages, as memcpy's floor faults in its buffers.
	if err := buf.Write(ctx, src, 0); err != nil {
		b.Fatal(err)
	}
	if err := buf.Read(ctx, dst, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(2 * mib64)
	b.ResetTimer()
	for range b.N {
		if err := buf.Write(ctx, src, 0); err != nil {
			b.Fatal(err)
		}
		if err := buf.Read(ctx, dst, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if dst[12345] != src[12345] {
		b.Fatal("read back differs")
	}
}

// BenchmarkMemcpy64MiBSDK copies 64 MiB between two host buffers: the
// floor of BenchmarkBuffer64MiB (SetBytes 64 MiB).
func BenchmarkMemcpy64MiBSDK(b *testing.B) {
	src, dst := make([]byte, mib64), make([]byte, mib64)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // warm, as BenchmarkBuffer64MiB is
	b.SetBytes(mib64)
	b.ResetTimer()
	for range b.N {
		copy(dst, src)
	}
}

// BenchmarkJobRoundTripTLS is BenchmarkJobRoundTrip on the remote path:
// jobs and completions as frames on a TLS connection over loopback, agent
// in process. Target: p50 ≤ 30 µs.
func BenchmarkJobRoundTripTLS(b *testing.B) {
	a := startSessAgent(b, sessOptions{tls: true})
	d := openDevice(b, "https://"+a.tcp, "alice", 0, faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13}))
	p := warmFinish(b, d)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		lat = append(lat, timeJob(b, d, p))
	}
	b.StopTimer()
	reportPercentiles(b, lat)
}

// BenchmarkBuffer64MiBTLS is BenchmarkBuffer64MiB on the remote path (the
// bytes in frames on TLS over loopback). For comparison only.
func BenchmarkBuffer64MiBTLS(b *testing.B) {
	a := startSessAgent(b, sessOptions{tls: true, ddr: 512 << 20})
	d := openDevice(b, "https://"+a.tcp, "alice", 0, faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13}))
	ctx := context.Background()
	buf, err := d.Alloc(ctx, mib64)
	if err != nil {
		b.Fatal(err)
	}
	src, dst := make([]byte, mib64), make([]byte, mib64)
	if err := buf.Write(ctx, src, 0); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(2 * mib64)
	b.ResetTimer()
	for range b.N {
		if err := buf.Write(ctx, src, 0); err != nil {
			b.Fatal(err)
		}
		if err := buf.Read(ctx, dst, 0); err != nil {
			b.Fatal(err)
		}
	}
}
