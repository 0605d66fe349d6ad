package modelserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// hourDelay holds requests for an hour, longer than any test lasts: only
// the rules that release a held request early can answer it.
const hourDelay = 3600_000_000

// histogram is the histogram of a metric with the model and version
// labels given, nil if it has none.
func histogram(t testing.TB, s *served, name, model, version string) *dto.Histogram {
	t.Helper()
	mfs, err := s.metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["model"] == model && labels["version"] == version {
				return m.GetHistogram()
			}
		}
	}
	return nil
}

// jobsOf counts the requests the batch size histogram saw by job size:
// exact for sizes that are bucket bounds.
func jobsOf(t testing.TB, s *served) map[float64]uint64 {
	t.Helper()
	h := histogram(t, s, "modelserver_infer_batch_size", "mnist", "1")
	if h == nil {
		return nil
	}
	out := map[float64]uint64{}
	var below uint64
	for _, b := range h.GetBucket() {
		if n := b.GetCumulativeCount() - below; n > 0 {
			out[b.GetUpperBound()] = n
		}
		below = b.GetCumulativeCount()
	}
	return out
}

// inferAll sends n binary MNIST requests at once and fails t unless every
// one is answered 200.
func inferAll(t *testing.T, s *served, n int) {
	t.Helper()
	body, header := binaryInfer(t, mnistCases(t)[0].Input, true)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", body, header); code != http.StatusOK {
				t.Errorf("%d %s", code, b)
			}
		})
	}
	wg.Wait()
}

// TestDynamicBatchingPreferred holds requests for an hour: 8 sent at once
// can only be answered as jobs of the preferred 4, each sent as soon as
// it is full; the queue and compute histograms see each request once.
func TestDynamicBatchingPreferred(t *testing.T) {
	cfg := fmt.Sprintf(`{"name": "mnist", "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": %d, "preferred_batch_size": [4]}}`, hourDelay)
	s := serve(t, writeRepo(t, cfg, "onnx"), Config{Timeout: 2 * time.Hour})
	inferAll(t, s, 8)
	if got := jobsOf(t, s); len(got) != 1 || got[4] != 8 {
		t.Errorf("requests by job size %v, want all 8 in jobs of 4", got)
	}
	for _, name := range []string{"modelserver_infer_queue_seconds", "modelserver_infer_compute_seconds", "modelserver_infer_duration_seconds"} {
		if h := histogram(t, s, name, "mnist", "1"); h.GetSampleCount() != 8 {
			t.Errorf("%s counted %d requests of mnist version 1, want 8", name, h.GetSampleCount())
		}
	}
	if n := countedBy(t, s, "http", "200"); n != 8 {
		t.Errorf("%v requests counted 200, want 8", n)
	}
}

// TestDynamicBatchingReleases checks the two rules that end a hold
// early: a lone request is sent alone once the delay has passed, and a
// request whose deadline comes before the delay's end is not held.
func TestDynamicBatchingReleases(t *testing.T) {
	for _, c := range []struct {
		name    string
		delay   int
		timeout time.Duration
	}{
		{"after the delay", 20_000, 0},                  // 20 ms, the default 30 s timeout
		{"before the deadline", hourDelay, time.Minute}, // the deadline is before the hour's end
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := fmt.Sprintf(`{"name": "mnist", "max_batch_size": 8, "dynamic_batching": {"max_queue_delay_microseconds": %d, "preferred_batch_size": [4, 8]}}`, c.delay)
			s := serve(t, writeRepo(t, cfg, "onnx"), Config{Timeout: c.timeout})
			inferAll(t, s, 1)
			if got := jobsOf(t, s); len(got) != 1 || got[1] != 1 {
				t.Errorf("requests by job size %v, want the one alone", got)
			}
		})
	}
}

// TestDynamicBatchingQueueAndCancel holds two requests for an hour in a
// queue of two: a third is refused with 429, and the held ones, their
// clients gone, leave the queue without an engine job.
func TestDynamicBatchingQueueAndCancel(t *testing.T) {
	cfg := fmt.Sprintf(`{"name": "mnist", "max_batch_size": 8, "max_queue_size": 2, "dynamic_batching": {"max_queue_delay_microseconds": %d}}`, hourDelay)
	s := serve(t, writeRepo(t, cfg, "onnx"), Config{Timeout: 2 * time.Hour})
	body, header := binaryInfer(t, mnistCases(t)[0].Input, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v2/models/mnist/infer", bytes.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			for k, v := range header {
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
				err = fmt.Errorf("answered %d while held", resp.StatusCode)
			}
			errs <- err
		}()
	}
	waitFor(t, "two requests held", func() bool { return gauge(t, s, "modelserver_infer_inflight") == 2 })
	if code, _, b := post(t, s.URL+"/v2/models/mnist/infer", body, header); code != http.StatusTooManyRequests {
		t.Errorf("a third request: %d %s, want 429", code, b)
	}
	cancel()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Errorf("a held request whose client went away: %v", err)
		}
	}
	waitFor(t, "the held requests counted 499", func() bool { return countedBy(t, s, "http", "499") == 2 })
	if g := gauge(t, s, "modelserver_infer_inflight"); g != 0 {
		t.Errorf("%v requests in flight after their clients went away, want 0", g)
	}
	if got := jobsOf(t, s); len(got) != 0 {
		t.Errorf("requests by job size %v, want no job", got)
	}
}
