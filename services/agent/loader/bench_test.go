package loader_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"io"
	"sort"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/shell"
)

// Benchmarks of `faas load` of the sealed two-chip AliDNN image (2 × 38 MiB
// of frames) from a registry on loopback (PostgreSQL + directory store),
// next to a floor measured in the same run: SHA-256 + AES-GCM + a copy of
// the same bytes, in one goroutine (the work a load cannot avoid).
//
//   - BenchmarkLoadCold: an empty node cache: resolve, verify, pull, key,
//     program, self-test.
//   - BenchmarkLoadWarm: the layers are cached.
//   - BenchmarkLoadFloor: the floor.
//
// The simulated boards do not sleep the modeled configuration-port time
// (about 150 ms for 76 MB at the ICAP rate), but they do parse, CRC-check and
// hash every frame as a real configuration engine does in hardware, on the
// host's cores. So besides phase times (<phase>-ms, medians) the load
// benchmarks measure in the same run:
//
//   - device-ms: programming the plaintext bitstreams straight into both
//     chips, in parallel: the simulated device's own share of a load;
//   - floor-ms: the floor, as BenchmarkLoadFloor;
//   - host-x-floor: (load − device-ms) / floor-ms, the host overhead against
//     the floor, whose target (≤ 1.5×) BENCHMARKS.md reports.

type loadBench struct {
	reg   *registry
	a     *agent
	ref   string
	img   [][]byte // the sealed layers
	plain [][]byte // the same layers' bitstreams
}

func newLoadBench(b *testing.B) *loadBench {
	reg := startRegistry(b)
	img, keys := reg.buildImage("alidnn-dual", images.FrameBytes, shell.PartVU9P, false)
	p := reg.publish("alidnn-dual", "1.0.0", img, keys, reg.isvKey, "available")
	reg.subscribe("alice", p)
	e := &loadBench{reg: reg, a: newAgent(b, reg, agentOptions{}), ref: p.ref}
	e.img = layerBytes(b, img)
	plain, _ := reg.buildImage("alidnn-dual", images.FrameBytes, shell.PartVU9P, true)
	e.plain = layerBytes(b, plain)
	return e
}

func layerBytes(b *testing.B, img v1.Image) [][]byte {
	layers, err := img.Layers()
	if err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for _, l := range layers {
		rc, err := l.Compressed()
		if err != nil {
			b.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, data)
	}
	return out
}

// deviceTime programs the plaintext bitstreams into both chips in parallel,
// as a load does, and returns the wall time.
func (e *loadBench) deviceTime(b *testing.B) time.Duration {
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(e.plain))
	for i, bit := range e.plain {
		sl, err := e.a.table.Slot(i)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			_, errs[i] = sl.Chip.Program(context.Background(), bytes.NewReader(bit), nil)
		})
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	e.clear(b, false)
	return d
}

func median(v []float64) float64 {
	sort.Float64s(v)
	return v[len(v)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (e *loadBench) clear(b *testing.B, dropCache bool) {
	t := e.a.table
	if err := t.Acquire("bench", []int{0, 1}, nil); err != nil {
		b.Fatal(err)
	}
	if err := t.ClearSlots(context.Background(), []int{0, 1}); err != nil {
		b.Fatal(err)
	}
	t.Release("bench", []int{0, 1})
	if dropCache {
		for _, en := range e.a.cache.List() {
			if err := e.a.cache.Remove(en.Digest); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func benchLoad(b *testing.B, cold bool) {
	e := newLoadBench(b)
	phases := map[string][]float64{}
	var total int64
	for _, l := range e.img {
		total += int64(len(l))
	}
	e.clear(b, false)
	if _, err := e.a.load("alice", e.ref, nil); err != nil { // warm up the registry's caches
		b.Fatal(err)
	}
	fl := newFloor()
	var loads, device, floor []float64
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		device = append(device, ms(e.deviceTime(b)))
		floor = append(floor, ms(fl.run(b)))
		e.clear(b, cold)
		b.StartTimer()
		start := time.Now()
		res, err := e.a.loader.Load(context.Background(), loader.Request{ID: "bench", Image: e.ref, Tenant: e.a.tenant("alice")})
		if err != nil {
			b.Fatal(err)
		}
		loads = append(loads, ms(time.Since(start)))
		for _, p := range res.Phases {
			phases[p.Name] = append(phases[p.Name], p.DurationMS)
		}
	}
	b.StopTimer()
	for name, v := range phases {
		b.ReportMetric(median(v), name+"-ms")
	}
	dev, flo := median(device), median(floor)
	b.ReportMetric(dev, "device-ms")
	b.ReportMetric(flo, "floor-ms")
	b.ReportMetric((median(loads)-dev)/flo, "host-x-floor")
}

func BenchmarkLoadCold(b *testing.B) { benchLoad(b, true) }
func BenchmarkLoadWarm(b *testing.B) { benchLoad(b, false) }

// BenchmarkLoadFloor is SHA-256, AES-256-GCM decryption and a copy of the
// image's sealed bytes: what any load must at least do to them.
func BenchmarkLoadFloor(b *testing.B) {
	fl := newFloor()
	b.SetBytes(fl.total)
	b.ResetTimer()
	for range b.N {
		fl.run(b)
	}
}

// floor is two sealed layers of the image's size and the work of the floor
// on them, in one goroutine.
type floor struct {
	gcm    cipher.AEAD
	sealed [][]byte
	dst    []byte
	sink   []byte
	total  int64
}

const floorChunk = 1 << 20

func newFloor() *floor {
	block, _ := aes.NewCipher(make([]byte, 32))
	gcm, _ := cipher.NewGCM(block)
	f := &floor{gcm: gcm, dst: make([]byte, floorChunk)}
	nonce := make([]byte, gcm.NonceSize())
	for i := range 2 {
		l := bytes.Repeat([]byte{byte(i + 1)}, images.FrameBytes+1<<20)
		f.total += int64(len(l))
		var s []byte
		for off := 0; off < len(l); off += floorChunk {
			s = gcm.Seal(s, nonce, l[off:min(off+floorChunk, len(l))], nil)
		}
		f.sealed = append(f.sealed, s)
		f.sink = make([]byte, len(l))
	}
	return f
}

func (f *floor) run(b *testing.B) time.Duration {
	start := time.Now()
	nonce := make([]byte, f.gcm.NonceSize())
	for _, s := range f.sealed {
		h := sha256.New()
		h.Write(s)
		h.Sum(nil)
		out := 0
		for off := 0; off < len(s); off += floorChunk + f.gcm.Overhead() {
			p, err := f.gcm.Open(f.dst[:0], nonce, s[off:min(off+floorChunk+f.gcm.Overhead(), len(s))], nil)
			if err != nil {
				b.Fatal(err)
			}
			out += copy(f.sink[out:], p)
		}
	}
	return time.Since(start)
}
