package ppocr_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/bitstreams/alidnn/model"
	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/ppocr"
	"github.com/fpga-faas/faas/sdk/faas"
)

// areaEngine is an in-process engine with a program area of area bytes, as
// a faasd session has (1 MiB): a stream that does not fit is refused with
// faasd's quota error, and a freed stream gives its bytes back.
type areaEngine struct {
	alidnn.Engine
	area, used, peak int
	uploads          int
}

type areaCode struct {
	alidnn.Code
	e *areaEngine
	n int
}

func (e *areaEngine) Program(ctx context.Context, insns []isa.Insn) (alidnn.Code, error) {
	n := len(insns) * isa.InsnBytes
	if e.used+n > e.area {
		return nil, &faas.Error{Code: agentapi.CodeQuota, Message: fmt.Sprintf("no free %d bytes in the %d-byte program area", n, e.area)}
	}
	c, err := e.Engine.Program(ctx, insns)
	if err != nil {
		return nil, err
	}
	e.used += n
	e.peak = max(e.peak, e.used)
	e.uploads++
	return areaCode{c, e, n}, nil
}

// Free is the capability alidnn.Session.Close uses to release a stream.
func (c areaCode) Free(context.Context) error {
	c.e.used -= c.n
	return nil
}

// TestNetReadEvicts: with a program area that holds two thirds of the
// page's programs, the Runner closes the session used longest ago to load
// the next program, and reads the page twice as with room for all: each
// program compiled once, loaded again when needed.
func TestNetReadEvicts(t *testing.T) {
	testenv.FullNetwork(t)
	m := models(t)
	sim, err := model.NewLocal(0)
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	img := page(t, 24, false, benchLines...)

	// Each program's size, with room for all.
	roomy := &areaEngine{Engine: alidnn.NewLocal(sim), area: 1 << 30}
	r := ppocr.NewRunner(roomy)
	for range 2 {
		if _, err := ppocr.Read(context.Background(), r, m, img); err != nil {
			t.Fatal(err)
		}
	}
	r.Close(context.Background())
	if roomy.used != 0 {
		t.Fatalf("%d program bytes still held after the Runner closed", roomy.used)
	}
	all, compiles := roomy.peak, r.Stats.Compiles

	tight := &areaEngine{Engine: alidnn.NewLocal(sim), area: all * 2 / 3}
	r = ppocr.NewRunner(tight)
	defer r.Close(context.Background())
	for range 2 { // the second read needs the programs evicted in the first again
		res, err := ppocr.Read(context.Background(), r, m, img)
		if err != nil {
			t.Fatalf("reading with a %d-byte program area (all programs take %d): %v", tight.area, all, err)
		}
		if len(res) != len(benchLines) || res[0].Text != benchLines[0] || res[1].Text != benchLines[1] {
			t.Errorf("read %+v, want %q", res, benchLines)
		}
	}
	if r.Stats.Compiles != compiles {
		t.Errorf("%d compiles, want %d as with room for all: an evicted program is loaded again, not compiled", r.Stats.Compiles, compiles)
	}
	if tight.uploads <= roomy.uploads {
		t.Errorf("%d uploads in the tight area, %d with room for all: nothing was evicted and loaded again", tight.uploads, roomy.uploads)
	}
	if tight.peak > tight.area {
		t.Errorf("programs took %d bytes of a %d-byte area", tight.peak, tight.area)
	}
}
