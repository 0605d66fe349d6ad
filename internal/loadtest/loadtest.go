// Package loadtest drives HTTP servers with an open-loop load for
// benchmarks: requests are scheduled at a fixed rate and their latency
// counts from the scheduled time, so a slow server's queueing shows (no
// coordinated omission).
package loadtest

import (
	"io"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"
)

// Stats are the latencies of an open-loop run.
type Stats struct {
	lat      []time.Duration // from each request's scheduled send time
	errs     int
	firstErr error
	elapsed  time.Duration // from the first scheduled send to the last answer
}

// OpenLoop offers rate requests per second for d: a scheduler hands each
// request's scheduled send time to a pool of workers, which send it and
// measure its latency from that time, so a slow server's queueing counts
// (no coordinated omission). check validates an answer.
func OpenLoop(c *http.Client, newReq func() (*http.Request, error), check func(*http.Response, []byte) error,
	rate int, d time.Duration, workers int) Stats {
	total := int(d.Seconds() * float64(rate))
	interval := time.Second / time.Duration(rate)
	sched := make(chan time.Time, total)
	var mu sync.Mutex
	st := Stats{lat: make([]time.Duration, 0, total)}
	var last time.Time
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for at := range sched {
				err := func() error {
					req, err := newReq()
					if err != nil {
						return err
					}
					resp, err := c.Do(req)
					if err != nil {
						return err
					}
					body, err := io.ReadAll(resp.Body)
					resp.Body.Close()
					if err != nil {
						return err
					}
					return check(resp, body)
				}()
				now := time.Now()
				mu.Lock()
				st.lat = append(st.lat, now.Sub(at))
				if now.After(last) {
					last = now
				}
				if err != nil {
					st.errs++
					if st.firstErr == nil {
						st.firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	start := time.Now()
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		sched <- at
	}
	close(sched)
	wg.Wait()
	st.elapsed = last.Sub(start)
	return st
}

// Percentile returns the p-quantile (0..1) of sorted latencies.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// Load is an open-loop load: Rate requests per second for Duration per
// benchmark iteration, sent by Workers goroutines.
type Load struct {
	Rate     int
	Duration time.Duration
	Workers  int
}

// Bench offers l per iteration after a short warm-up and reports p50-ms,
// p99-ms, max-ms and the achieved req/s. ns/op is overridden with the p99
// latency, so that BENCHMARKS.md's comparisons are ratios of p99s. Any
// failed request fails the benchmark.
func Bench(b *testing.B, c *http.Client, newReq func() (*http.Request, error), check func(*http.Response, []byte) error, l Load) {
	b.Helper()
	// Warm up the connections and the server's caches.
	if st := OpenLoop(c, newReq, check, l.Rate, 200*time.Millisecond, l.Workers); st.errs > 0 {
		b.Fatalf("warm-up: %d errors, first: %v", st.errs, st.firstErr)
	}
	var lat []time.Duration
	var elapsed time.Duration
	b.ResetTimer()
	for range b.N {
		st := OpenLoop(c, newReq, check, l.Rate, l.Duration, l.Workers)
		if st.errs > 0 {
			b.Fatalf("%d of %d requests failed, first: %v", st.errs, len(st.lat), st.firstErr)
		}
		lat = append(lat, st.lat...)
		elapsed += st.elapsed
	}
	b.StopTimer()
	slices.Sort(lat)
	p50, p99 := Percentile(lat, 0.50), Percentile(lat, 0.99)
	b.ReportMetric(float64(p50)/1e6, "p50-ms")
	b.ReportMetric(float64(p99)/1e6, "p99-ms")
	b.ReportMetric(float64(Percentile(lat, 1))/1e6, "max-ms")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(p99), "ns/op")
}
