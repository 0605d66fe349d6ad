package alidnn

import (
	"encoding/binary"
	"math"
)

// split returns part j of w divided into n int8 parts that sum to w.
func split(w int64, n, j int) int64 {
	q, r := w/int64(n), w%int64(n)
	if int64(j) < abs(r) {
		if r < 0 {
			return q - 1
		}
		return q + 1
	}
	return q
}

// blockLists returns, for each output block, the input blocks it must
// multiply: those where some weight of some tap, part or batch is not zero
// (a grouped convolution's blocks outside its groups, a permutation's
// blocks off its pattern), and at least one, so every tile is computed.
// Skipping a zero block changes nothing but 0 × ±Inf or NaN inputs.
func (cv *convSpec) blockLists() [][]int {
	OB, KB := (cv.oc+lanes-1)/lanes, (cv.ic+lanes-1)/lanes
	if cv.wT != nil { // weights computed on the device: every block
		lists := make([][]int, OB)
		for ob := range lists {
			for kb := range KB {
				lists[ob] = append(lists[ob], kb)
			}
		}
		return lists
	}
	taps := cv.kh * cv.kw
	batches := 1
	if cv.batched {
		batches = max(1, len(cv.wF)+len(cv.wI)) / (cv.oc * cv.icg() * taps)
	}
	nz := make([]bool, OB*KB)
	for b := range batches {
		for o := range cv.oc {
			for k := range cv.ic {
				if nz[(o/lanes)*KB+k/lanes] {
					continue
				}
				for t := range taps {
					src := cv.weight(b, o, k, t)
					if src >= 0 && (cv.fp && cv.wF[src] != 0 || !cv.fp && cv.wI[src] != 0) {
						nz[(o/lanes)*KB+k/lanes] = true
						break
					}
				}
			}
		}
	}
	lists := make([][]int, OB)
	for ob := range OB {
		for kb := range KB {
			if nz[ob*KB+kb] {
				lists[ob] = append(lists[ob], kb)
			}
		}
		if lists[ob] == nil {
			lists[ob] = []int{0}
		}
	}
	return lists
}

// weightBlob lays the weights out as the weight SRAM holds them: for each
// batch (outer index, if the weights are batched), output block ob and
// input block of blocks[ob], parts × kh × kw blocks of 16×16, output
// channels on the rows; a batch's blocks of ob start at block wstart[ob].
func (cv *convSpec) weightBlob(ie elem, outer int, blocks [][]int, wstart []int) []byte {
	OB := len(blocks)
	parts := cv.parts()
	batches := 1
	if cv.batched {
		batches = outer
	}
	taps := cv.kh * cv.kw
	wb := lanes * lanes * ie.size()
	wblob := make([]byte, batches*wstart[OB]*parts*taps*wb)
	for b := range batches {
		for o := range cv.oc {
			for j, kb := range blocks[o/lanes] {
				for k := kb * lanes; k < min(kb*lanes+lanes, cv.ic); k++ {
					for t := range taps {
						src := cv.weight(b, o, k, t)
						if src < 0 {
							continue
						}
						for part := range parts {
							el := (b*wstart[OB]+wstart[o/lanes]+j)*parts*taps + part*taps + t
							off := el*wb + ((o%lanes)*lanes+k%lanes)*ie.size()
							if cv.fp {
								binary.LittleEndian.PutUint32(wblob[off:], math.Float32bits(cv.wF[src]))
							} else {
								wblob[off] = byte(int8(split(cv.wI[src], parts, part)))
							}
						}
					}
				}
			}
		}
	}
	return wblob
}

// parts is how many int8 parts the widest weight needs (see convSpec.wI).
func (cv *convSpec) parts() int {
	parts := 1
	for _, w := range cv.wI {
		switch {
		case w < -256 || w > 254:
			parts = 3
		case (w < -128 || w > 127) && parts < 2:
			parts = 2
		}
	}
	return parts
}
