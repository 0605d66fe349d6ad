package alidnn

import "fmt"

// An inverted-residual block expands its input with a 1×1 convolution, a
// ReLU6 after it, and convolves the result depthwise. On the ALU that
// ReLU6 is a max and a min over every pixel of the widest tensor of the
// block; the depthwise unit can clamp its inputs as it reads them
// (in_clamp), for free. So when a depthwise layer on the unit is the only
// reader of a layer ending in a ReLU or Clip, the clamp moves from the
// producer's epilogue to the unit's input: the producer stores the
// unclamped tensor, which nothing else reads.

// deferInputClamps moves, for each fp32 depthwise layer the unit will run,
// the trailing ReLU or Clip of the layer that writes its input to it (see
// layer.inClamp). Not while calibrating: that run measures the ranges of
// the tensors as the graph defines them.
func (c *compiler) deferInputClamps() {
	if c.opts.calibrating {
		return
	}
	refs, writers := map[*value]int{}, map[*value]int{}
	producer := map[*value]*layer{}
	for _, l := range c.layers {
		writers[l.out]++
		if l.in != nil {
			refs[l.in]++
		}
		for _, s := range l.steps {
			if s.t != nil {
				refs[s.t]++
			}
		}
		producer[l.out] = l
	}
	scratch := &emitter{lastCompute: -1, loadFree: 1, accFree: 1, loadsBehind: true}
	for _, l := range c.layers {
		if l.kind != lGemm || l.conv == nil || !l.conv.fp || l.conv.groups <= 1 || l.in == nil {
			continue
		}
		p := producer[l.in]
		// One writer of the whole tensor, whose rows are the tensor's
		// channels, and one reader.
		if p == nil || p == l || writers[l.in] != 1 || p.outBlock != 0 || p.outOuter != 0 || p.rows != nil ||
			refs[l.in] != 1 || l.in.uses != 1 || c.outputs[l.in.name] || !p.accFP {
			continue
		}
		n := trailingClamp(p.steps)
		if n == 0 {
			continue
		}
		l.inClamp = p.steps[len(p.steps)-n:]
		if scratch.planDwUnit(l) == nil {
			l.inClamp = nil
			continue
		}
		p.steps = p.steps[:len(p.steps)-n]
	}
}

// trailingClamp is how many of steps' last steps are an fp32 ReLU or a
// Clip with a low bound (a max, then maybe a min) that leaves 0 at 0 in
// every channel, as the unit's input clamp must for the padding; 0 if
// they are not.
func trailingClamp(steps []step) int {
	k := len(steps)
	if k == 0 || !steps[k-1].fp {
		return 0
	}
	hiOK := func(s step) bool { return s.kind == sMinRow && allF(s.rowF, func(v float32) bool { return v >= 0 }) }
	loOK := func(s step) bool {
		return s.fp && (s.kind == sRelu || s.kind == sMaxRow && allF(s.rowF, func(v float32) bool { return v <= 0 }))
	}
	switch {
	case k >= 2 && loOK(steps[k-2]) && hiOK(steps[k-1]):
		return 2
	case loOK(steps[k-1]):
		return 1
	}
	return 0
}

func allF(v []float32, ok func(float32) bool) bool {
	for _, x := range v {
		if !ok(x) {
			return false
		}
	}
	return true
}

// inClampRows are the unit's input low and high rows for steps (a ReLU or
// a Clip's max, then maybe its min; see trailingClamp).
func (p *dwuPlan) inClampRows(steps []step) ([][]byte, error) {
	lo := p.paramRow(steps[0])
	hi := p.unbounded()
	if len(steps) == 2 {
		hi = p.paramRow(steps[1])
	}
	if lo == nil || hi == nil {
		return nil, fmt.Errorf("the input clamp's rows: %w", ErrUnsupported)
	}
	return [][]byte{lo, hi}, nil
}
