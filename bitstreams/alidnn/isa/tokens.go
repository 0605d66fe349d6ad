package isa

import "fmt"

// Fifo names one of the four token FIFOs, by direction.
type Fifo uint8

// The token FIFOs.
const (
	LoadToCompute  Fifo = 0 // load's push_next, compute's pop_prev
	ComputeToLoad  Fifo = 1 // compute's push_prev, load's pop_next
	ComputeToStore Fifo = 2 // compute's push_next, store's pop_prev
	StoreToCompute Fifo = 3 // store's push_prev, compute's pop_next
	numFifos            = 4
)

var fifoNames = [...]string{"load→compute", "compute→load", "compute→store", "store→compute"}

func (f Fifo) String() string {
	if f < numFifos {
		return fifoNames[f]
	}
	return fmt.Sprintf("Fifo(%d)", uint8(f))
}

// fifos returns the FIFOs an instruction of queue q pops from and pushes
// to, by flag: -1 where the flag has no FIFO (Encode rejects those).
func fifos(q Queue) (popPrev, popNext, pushPrev, pushNext int) {
	switch q {
	case QueueLoad:
		return -1, int(ComputeToLoad), -1, int(LoadToCompute)
	case QueueCompute:
		return int(LoadToCompute), int(StoreToCompute), int(ComputeToLoad), int(ComputeToStore)
	}
	return int(ComputeToStore), -1, int(StoreToCompute), -1
}

// consumer is the queue that pops from each FIFO.
var consumer = [numFifos]Queue{QueueCompute, QueueLoad, QueueStore, QueueCompute}

// TokenBound returns, for each FIFO, the most tokens it can hold while
// prog runs, however the queues' speeds interleave: the pushes its
// producer has made by some instruction, less the pops its consumer must
// have made before that instruction could run (those that happen before
// it through the tokens). A program whose bound stays within TokenDepth
// never overflows a FIFO on any hardware timing. It fails if prog can
// deadlock: a pop no earlier push can satisfy.
func TokenBound(prog []Insn) ([numFifos]int, error) {
	var bound [numFifos]int
	// Program order within each queue; happens-before as vector clocks:
	// vc[q] is the position in queue q of the latest instruction of q that
	// must have completed (-1 none).
	var queues [numQueues][]int
	pos := make([]int, len(prog))
	for k, in := range prog {
		q := in.Queue()
		if q >= numQueues {
			return bound, fmt.Errorf("instruction %d: queue %d", k, q)
		}
		pos[k] = len(queues[q])
		queues[q] = append(queues[q], k)
	}
	// popsBy[f][p]: pops from FIFO f among its consumer's first p
	// instructions.
	var popsBy [numFifos][]int
	for f := range numFifos {
		c := consumer[f]
		popsBy[f] = make([]int, len(queues[c])+1)
		for p, k := range queues[c] {
			n := 0
			pp, pn, _, _ := fifos(c)
			if prog[k].PopPrev && pp == f || prog[k].PopNext && pn == f {
				n = 1
			}
			popsBy[f][p+1] = popsBy[f][p] + n
		}
	}
	type clock [numQueues]int
	var (
		pushers [numFifos][]clock // the clock of each push, in FIFO order
		popped  [numFifos]int
		pushed  [numFifos]int
		next    [numQueues]int
		last    [numQueues]clock
		done    int
	)
	for q := range last {
		last[q] = clock{-1, -1, -1}
	}
	for done < len(prog) {
		progress := false
		for q := range numQueues {
			for next[q] < len(queues[q]) {
				k := queues[q][next[q]]
				in := prog[k]
				pp, pn, sp, sn := fifos(Queue(q))
				var pops []int
				if in.PopPrev && pp >= 0 {
					pops = append(pops, pp)
				}
				if in.PopNext && pn >= 0 {
					pops = append(pops, pn)
				}
				ready := true
				for _, f := range pops {
					if popped[f] >= len(pushers[f]) {
						ready = false
					}
				}
				if !ready {
					break
				}
				vc := last[q]
				vc[q] = pos[k]
				for _, f := range pops {
					src := pushers[f][popped[f]]
					popped[f]++
					for r := range vc {
						vc[r] = max(vc[r], src[r])
					}
				}
				for _, f := range []int{sp, sn} {
					if f < 0 || !(f == sp && in.PushPrev || f == sn && in.PushNext) {
						continue
					}
					pushed[f]++
					pushers[f] = append(pushers[f], vc)
					must := popsBy[f][vc[consumer[f]]+1]
					bound[f] = max(bound[f], pushed[f]-must)
				}
				last[q] = vc
				next[q]++
				done++
				progress = true
			}
		}
		if !progress {
			for q := range numQueues {
				if next[q] < len(queues[q]) {
					return bound, fmt.Errorf("instruction %d (%s) waits for a token no earlier instruction pushes", queues[q][next[q]], prog[queues[q][next[q]]].Op)
				}
			}
		}
	}
	return bound, nil
}
