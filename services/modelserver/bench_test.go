package modelserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bitsalidnn "github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/internal/loadtest"
	"github.com/fpga-faas/faas/sdk/alidnn"
)

// benchClients is how many requests the throughput benchmarks keep in
// flight: twice what the instance's two job slots of four runs hold, so
// that the engine finds runs waiting whenever a job ends, by either path.
const benchClients = 16

// concurrently runs b.N calls of f on n goroutines and reports req/s.
func concurrently(b *testing.B, n int, f func() error) {
	b.Helper()
	b.ResetTimer()
	if err := calls(b.N, n, f); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}

// calls makes count calls of f on n goroutines and returns the first
// error.
func calls(count, n int, f func() error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for range n {
		wg.Go(func() {
			for next.Add(1) <= int64(count) {
				if err := f(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// interleaveBlock is how many requests each path gets in turn.
const interleaveBlock = 128

// interleaved runs b.N requests through the server and b.N direct runs,
// in alternating blocks of interleaveBlock, so that both meet the same
// machine: on a shared host the load of other processes changes by the
// second. It reports the server's req/s and the direct path's
// direct-req/s; an op is one of each.
func interleaved(b *testing.B, server, direct func() error) {
	b.Helper()
	var took [2]time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += interleaveBlock {
		n := min(interleaveBlock, b.N-done)
		for k, f := range []func() error{direct, server} {
			start := time.Now()
			if err := calls(n, benchClients, f); err != nil {
				b.Fatal(err)
			}
			took[k] += time.Since(start)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/took[1].Seconds(), "req/s")
	b.ReportMetric(float64(b.N)/took[0].Seconds(), "direct-req/s")
}

// restPost sends the binary request body to url and checks for 200.
func restPost(c *http.Client, url string, body []byte, header map[string]string) error {
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	return err
}

// BenchmarkThroughput runs MNIST with benchClients requests in flight on
// one in-process engine, through the server — rest: its REST API with
// binary tensors; grpc: ModelInfer with raw contents — and, in
// alternating blocks, directly: Session.Run on a session opened on the
// same engine as the server opens its instance (batch 4, pipeline 2).
func BenchmarkThroughput(b *testing.B) {
	c := mnistCases(b)[0]
	direct := func(b *testing.B, eng alidnn.Engine) func() error {
		src, err := os.ReadFile(filepath.Join(mnistDir(b), "model.onnx"))
		if err != nil {
			b.Fatal(err)
		}
		p, err := alidnn.Compile(decodeModel(b, src))
		if err != nil {
			b.Fatal(err)
		}
		ctx := context.Background()
		sess, err := alidnn.Open(ctx, eng, p, alidnn.WithBatch(4), alidnn.WithPipeline(DefaultPipeline))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { sess.Close(ctx) })
		return func() error {
			_, err := sess.Run(ctx, c.Input)
			return err
		}
	}
	b.Run("rest", func(b *testing.B) {
		eng := simEngine(b)
		s := serve(b, writeRepo(b, mnistConfig, "onnx"), Config{Engines: []alidnn.Engine{eng}})
		body, header := binaryInfer(b, c.Input, true)
		hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: benchClients}}
		defer hc.CloseIdleConnections()
		interleaved(b, func() error { return restPost(hc, s.URL+"/v2/models/mnist/infer", body, header) }, direct(b, eng))
	})
	b.Run("grpc", func(b *testing.B) {
		eng := simEngine(b)
		s := serveGRPC(b, writeRepo(b, mnistConfig, "onnx"), Config{Engines: []alidnn.Engine{eng}})
		req := rawInfer(b, "", c.Input)
		interleaved(b, func() error {
			_, err := s.client.ModelInfer(context.Background(), req)
			return err
		}, direct(b, eng))
	})
}

// latencyRate is the open-loop rate of BenchmarkLatency: about a third of
// what one in-process engine serves on two cores.
const latencyRate = 100

// BenchmarkLatency offers MNIST infer requests (REST, binary tensors) at
// latencyRate a second for 2 s, open loop: latency counts from each
// request's scheduled time. ns/op is the p99; live is GET
// /v2/health/live under the same load, the server's floor.
func BenchmarkLatency(b *testing.B) {
	s := serve(b, writeRepo(b, mnistConfig, "onnx"), Config{})
	body, header := binaryInfer(b, mnistCases(b)[0].Input, true)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	defer hc.CloseIdleConnections()
	ok := func(resp *http.Response, body []byte) error {
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%d %s", resp.StatusCode, body)
		}
		return nil
	}
	load := loadtest.Load{Rate: latencyRate, Duration: 2 * time.Second, Workers: 32}
	b.Run("infer", func(b *testing.B) {
		loadtest.Bench(b, hc, func() (*http.Request, error) {
			req, err := http.NewRequest(http.MethodPost, s.URL+"/v2/models/mnist/infer", bytes.NewReader(body))
			for k, v := range header {
				req.Header.Set(k, v)
			}
			return req, err
		}, ok, load)
	})
	b.Run("live", func(b *testing.B) {
		loadtest.Bench(b, hc, func() (*http.Request, error) { return http.NewRequest(http.MethodGet, s.URL+"/v2/health/live", nil) }, ok, load)
	})
}

// jobTime is the engine time of every job on a slowBoard.
const jobTime = 10 * time.Millisecond

// slowBoard is a simulated board whose every job takes jobTime of engine
// time, one job at a time, whatever its lanes: a device whose per-job
// cost dominates the model's compute, which is what coalescing requests
// into one job saves.
type slowBoard struct {
	alidnn.Engine
	mu     sync.Mutex
	freeAt time.Time
}

func (s *slowBoard) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	c, err := s.Engine.Program(ctx, insns)
	return slowCode{c, s}, err
}

type slowCode struct {
	alidnn.Code
	b *slowBoard
}

func (c slowCode) Submit(ctx context.Context) (alidnn.Job, error) {
	c.b.mu.Lock()
	start := time.Now()
	if start.Before(c.b.freeAt) {
		start = c.b.freeAt
	}
	c.b.freeAt = start.Add(jobTime)
	c.b.mu.Unlock()
	j, err := c.Code.Submit(ctx)
	return slowJob{j, start.Add(jobTime)}, err
}

type slowJob struct {
	alidnn.Job
	end time.Time
}

func (j slowJob) Wait(ctx context.Context) (bitsalidnn.Stats, error) {
	st, err := j.Job.Wait(ctx)
	time.Sleep(time.Until(j.end))
	return st, err
}

// BenchmarkBatching runs MNIST on a slowBoard through the REST API with
// 32 requests in flight: none, max_batch_size 1 (a job a request);
// dynamic, max_batch_size 8 (requests that wait for a job slot coalesced
// into one job). Each reports req/s and the requests a job ran.
func BenchmarkBatching(b *testing.B) {
	c := mnistCases(b)[0]
	for _, bc := range []struct{ name, config string }{
		{"none", `{"name": "mnist", "max_batch_size": 1}`},
		{"dynamic", `{"name": "mnist", "max_batch_size": 8}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := serve(b, writeRepo(b, bc.config, "onnx"), Config{Engines: []alidnn.Engine{&slowBoard{Engine: simEngine(b)}}})
			body, header := binaryInfer(b, c.Input, true)
			hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
			defer hc.CloseIdleConnections()
			concurrently(b, 32, func() error { return restPost(hc, s.URL+"/v2/models/mnist/infer", body, header) })
			b.ReportMetric(maxBatch(b, s), "max-batch")
			b.ReportMetric(meanBatch(b, s), "mean-batch")
		})
	}
}

// meanBatch is the mean of the batch size histogram: the requests a job
// ran, on average.
func meanBatch(t testing.TB, s *served) float64 {
	t.Helper()
	mfs, err := s.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "modelserver_infer_batch_size" {
			h := mf.GetMetric()[0].GetHistogram()
			return h.GetSampleSum() / float64(h.GetSampleCount())
		}
	}
	return 0
}
