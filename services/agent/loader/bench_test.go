package loader_test

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"io"
	"sort"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/images"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/shell"
)

// Benchmarks of `faas load` of the sealed two-chip AliDNN image (2 × 38 MiB
// of frames) from a registry on loopback (PostgreSQL + directory store),
// next to the floor the issue names: SHA-256 + AES-GCM + a copy of the same
// bytes, in one goroutine, in the same run.
//
//   - BenchmarkLoadCold: an empty node cache: resolve, verify, pull, key,
//     program, self-test.
//   - BenchmarkLoadWarm: the layers are cached.
//   - BenchmarkLoadFloor: the floor.
//
// The simulated boards do not sleep the modeled configuration-port time
// (about 150 ms for 76 MB at the ICAP rate), so the figures are the host's
// work. Phase times are reported as <phase>-ms (medians).

type loadBench struct {
	reg *registry
	a   *agent
	ref string
	img [][]byte // the sealed layers
}

func newLoadBench(b *testing.B) *loadBench {
	reg := startRegistry(b)
	img, keys := reg.buildImage("alidnn-dual", images.FrameBytes, shell.PartVU9P, false)
	p := reg.publish("alidnn-dual", "1.0.0", img, keys, reg.isvKey, "available")
	reg.subscribe("alice", p)
	e := &loadBench{reg: reg, a: newAgent(b, reg, agentOptions{}), ref: p.ref}
	layers, _ := img.Layers()
	for _, l := range layers {
		rc, _ := l.Compressed()
		data, _ := io.ReadAll(rc)
		e.img = append(e.img, data)
	}
	return e
}

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
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		e.clear(b, cold)
		b.StartTimer()
		res, err := e.a.loader.Load(context.Background(), loader.Request{ID: "bench", Image: e.ref, Tenant: e.a.tenant("alice")})
		if err != nil {
			b.Fatal(err)
		}
		for _, p := range res.Phases {
			phases[p.Name] = append(phases[p.Name], p.DurationMS)
		}
	}
	b.StopTimer()
	for name, v := range phases {
		sort.Float64s(v)
		b.ReportMetric(v[len(v)/2], name+"-ms")
	}
}

func BenchmarkLoadCold(b *testing.B) { benchLoad(b, true) }
func BenchmarkLoadWarm(b *testing.B) { benchLoad(b, false) }

// BenchmarkLoadFloor is SHA-256, AES-256-GCM decryption and a copy of the
// image's sealed bytes: what any load must at least do to them.
func BenchmarkLoadFloor(b *testing.B) {
	var layers [][]byte
	var total int64
	for i := range 2 {
		l := bytes.Repeat([]byte{byte(i + 1)}, images.FrameBytes+1<<20)
		layers = append(layers, l)
		total += int64(len(l))
	}
	block, _ := aes.NewCipher(make([]byte, 32))
	gcm, _ := cipher.NewGCM(block)
	const chunk = 1 << 20
	nonce := make([]byte, gcm.NonceSize())
	var sealed [][]byte
	for _, l := range layers {
		var s []byte
		for off := 0; off < len(l); off += chunk {
			s = gcm.Seal(s, nonce, l[off:min(off+chunk, len(l))], nil)
		}
		sealed = append(sealed, s)
	}
	dst := make([]byte, chunk)
	sink := make([]byte, len(layers[0]))
	b.SetBytes(total)
	b.ResetTimer()
	for range b.N {
		for _, s := range sealed {
			h := sha256.New()
			h.Write(s)
			h.Sum(nil)
			out := 0
			for off := 0; off < len(s); off += chunk + gcm.Overhead() {
				p, err := gcm.Open(dst[:0], nonce, s[off:min(off+chunk+gcm.Overhead(), len(s))], nil)
				if err != nil {
					b.Fatal(err)
				}
				out += copy(sink[out:], p)
			}
		}
	}
}
