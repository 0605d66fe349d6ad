package deviceplugin_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/fpga-faas/faas/services/agent/deviceplugin"
)

// BenchmarkAllocate is the kubelet's Allocate of one chip over the plugin
// socket: parse, conflict check, credential, response. Each allocation of
// slot-0 supersedes the previous one, as when the kubelet hands it on.
func BenchmarkAllocate(b *testing.B) {
	r := newRig(b, rigOptions{grace: 1 << 62})
	chip := r.kubelet.accept(3)[deviceplugin.ResourceChip]
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := chip.allocate("pod", "slot-0"); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkAllocateFloor is the floor of BenchmarkAllocate: a gRPC round
// trip on the same plugin socket that does no work (GetDevicePluginOptions).
func BenchmarkAllocateFloor(b *testing.B) {
	r := newRig(b, rigOptions{grace: 1 << 62})
	chip := r.kubelet.accept(3)[deviceplugin.ResourceChip]
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, err := chip.cli.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkHealthChange is the time from a fault (the inter-chip link of
// board 0 dropping, then coming back) to the kubelet's ListAndWatch
// stream reporting the chip's new health, at the default poll period.
// Faults come at a random point of the period, as real ones do; right
// after a report they would always wait a whole period.
func BenchmarkHealthChange(b *testing.B) {
	const poll = 250 * time.Millisecond
	r := newRig(b, rigOptions{poll: poll})
	jitter := func() {
		b.StopTimer()
		time.Sleep(rand.N(poll))
		b.StartTimer()
	}
	chip := r.kubelet.accept(3)[deviceplugin.ResourceChip]
	chip.await("healthy", healthAll(chips, H))
	lat := make([]time.Duration, 0, 2*b.N)
	b.ResetTimer()
	for range b.N {
		jitter()
		start := time.Now()
		r.boards[0].DropLink()
		chip.await("link down", map[string]string{"slot-0": U})
		lat = append(lat, time.Since(start))
		jitter()
		start = time.Now()
		r.boards[0].RestoreLink()
		chip.await("link up", map[string]string{"slot-0": H})
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

// BenchmarkHealthFloor is the floor of BenchmarkHealthChange: a fault at
// a random point of the poll period waits for the next tick of a ticker of
// that period, with no chip to read and no stream to send.
func BenchmarkHealthFloor(b *testing.B) {
	const poll = 250 * time.Millisecond
	t := time.NewTicker(poll)
	defer t.Stop()
	lat := make([]time.Duration, 0, 2*b.N)
	b.ResetTimer()
	for range 2 * b.N {
		b.StopTimer()
		time.Sleep(rand.N(poll))
		b.StartTimer()
		start := time.Now()
		<-t.C
		lat = append(lat, time.Since(start))
	}
	reportPercentiles(b, lat)
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(at(0.50), "p50-µs")
	b.ReportMetric(at(0.99), "p99-µs")
}
