package alidnn_test

import (
	"context"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	engine "github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// BenchmarkResNet50 times one inference of light_resnet50 in fp32 on the
// in-process engine (inputs up, run, outputs down) and reports the modeled
// device time.
func BenchmarkResNet50(b *testing.B) {
	m, dir := readLight(b, "resnet50")
	prog, err := alidnn.Compile(m)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	s, err := alidnn.Load(ctx, local(b), prog)
	if err != nil {
		b.Fatal(err)
	}
	in, _ := readSet(b, filepath.Join(dir, "test_data_set_0"))
	in.Name = m.Graph.Inputs[0].Name
	var dev uint64
	for b.Loop() {
		res, err := s.Run(ctx, in)
		if err != nil {
			b.Fatal(err)
		}
		dev = res.Stats.DeviceNS()
	}
	b.ReportMetric(float64(dev)/1e6, "device-ms")
	b.ReportMetric(float64(prog.MACs)/1e9, "GMAC")
}

// BenchmarkResNet50Compile times compiling light_resnet50 for fp32 (the
// model already read) and reports the array's bound for the program:
// its multiply-accumulates at the fp32 rate of the 16×16 array
// (256 / FP32Rate per cycle) and the engine clock, the time no schedule
// can beat. BenchmarkResNet50's device-ms is compared with it.
func BenchmarkResNet50Compile(b *testing.B) {
	m, _ := readLight(b, "resnet50")
	var prog *alidnn.Program
	var err error
	for b.Loop() {
		if prog, err = alidnn.Compile(m); err != nil {
			b.Fatal(err)
		}
	}
	cfg := engine.Default
	perCycle := float64(cfg.BlockIn*cfg.BlockOut) / float64(cfg.FP32Rate)
	b.ReportMetric(float64(prog.MACs)/perCycle/float64(cfg.ClockMHz)/1e3, "bound-ms")
	b.ReportMetric(float64(len(prog.Insns)), "insns")
}

// BenchmarkResNet50Naive is BenchmarkResNet50's baseline: ResNet-50's
// multiply-accumulates (4.09 G) as straightforward fp32 dot products of 576
// terms in Go, with no data movement — a host running the network in the
// obvious way.
func BenchmarkResNet50Naive(b *testing.B) {
	const macs = 4_089_184_256 // light_resnet50's convolutions and FC, as compiled
	const k = 576
	x := make([]float32, k)
	w := make([]float32, k)
	for i := range x {
		x[i], w[i] = float32(i%7)*0.1, float32(i%5)*0.2
	}
	var sink float32
	for b.Loop() {
		for range macs / k {
			var s float32
			for i := range k {
				s += x[i] * w[i]
			}
			sink += s
		}
	}
	if sink == 1 {
		b.Log(sink)
	}
}

// BenchmarkMNISTBatch measures MNIST's throughput on the in-process engine
// with 4·batch runs in flight and two job slots, one op per run: batch=1
// (one run a job), batch=16 (a session coalescing up to 16 runs a job, one
// lane each) and program=16 (the model compiled ForBatch(16): up to 16 runs
// share one run of the program). It reports runs/s, the modeled device
// time per run and the runs that shared a job.
func BenchmarkMNISTBatch(b *testing.B) {
	dir := testenv.TestData(b, "onnx", "models", "mnist")
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		b.Fatal(err)
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		b.Fatal(err)
	}
	batched, err := alidnn.Compile(m, alidnn.ForBatch(16))
	if err != nil {
		b.Fatal(err)
	}
	in, _ := readSet(b, filepath.Join(dir, "test_data_set_0"))
	in.Name = m.Graph.Inputs[0].Name
	for _, c := range []struct {
		name  string
		prog  *alidnn.Program
		batch int
	}{{"batch=1", prog, 1}, {"batch=16", prog, 16}, {"program=16", batched, 16}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			s, err := alidnn.Open(ctx, alidnn.NewLocal(local(b)), c.prog, alidnn.WithBatch(c.batch), alidnn.WithPipeline(2))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(ctx)
			var next atomic.Int64
			var mu sync.Mutex
			var device, jobs float64 // device ns and jobs, each run adding its share of its job
			var wg sync.WaitGroup
			b.ResetTimer()
			for range 4 * c.batch {
				wg.Go(func() {
					for next.Add(1) <= int64(b.N) {
						res, err := s.Run(ctx, in)
						if err != nil {
							b.Error(err)
							return
						}
						mu.Lock()
						device += float64(res.Stats.DeviceNS()) / float64(res.Batch)
						jobs += 1 / float64(res.Batch)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
			b.ReportMetric(device/float64(b.N)/1e3, "device-us/run")
			b.ReportMetric(float64(b.N)/jobs, "runs/job")
		})
	}
}
