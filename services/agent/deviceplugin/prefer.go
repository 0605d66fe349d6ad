package deviceplugin

import (
	"fmt"
	"slices"
	"sort"
)

// prefer picks size devices of kind k from avail, must ones first:
//
//   - chips: the partners of chips already picked, then whole boards (both
//     chips of a board together), then chips of boards already broken, so
//     that whole boards stay free for faas.dev/board and two-chip images;
//   - shares: on chips that already have shares allocated (packing, so
//     that other chips stay free whole), then on chips holding an engine
//     (with engines loaded on demand, an empty chip costs a load), then on
//     chips that hold the rest of the request, fewest free shares first;
//   - boards: in order.
func (p *Plugin) prefer(k kind, avail, must []string, size int) ([]string, error) {
	if size < len(must) || size > len(avail) {
		return nil, fmt.Errorf("%s: %d devices wanted of %d available with %d required", k, size, len(avail), len(must))
	}
	for _, d := range append(slices.Clone(avail), must...) {
		if _, err := p.inv.parse(k, d); err != nil {
			return nil, err
		}
	}
	out := slices.Clone(must)
	picked := map[string]bool{}
	for _, d := range must {
		picked[d] = true
	}
	var rest []string
	for _, d := range avail {
		if !picked[d] {
			rest = append(rest, d)
		}
	}
	take := func(d string) {
		if !picked[d] && len(out) < size {
			picked[d] = true
			out = append(out, d)
		}
	}
	switch k {
	case kindChip:
		p.preferChips(rest, out, size, take)
	case kindShare:
		p.preferShares(rest, out, size, take)
	}
	p.sortDevices(k, rest)
	for _, d := range rest {
		take(d)
	}
	return out, nil
}

func (p *Plugin) preferChips(rest, out []string, size int, take func(string)) {
	free := map[int]bool{}
	for _, d := range rest {
		ref, _ := p.inv.parse(kindChip, d)
		free[ref.slot] = true
	}
	for _, d := range out {
		ref, _ := p.inv.parse(kindChip, d)
		if free[ref.slot^1] {
			take(chipID(ref.slot ^ 1))
		}
	}
	n := len(out)
	for b := 0; b < p.inv.nslots/2 && size-n >= 2; b++ {
		if free[2*b] && free[2*b+1] {
			take(chipID(2 * b))
			take(chipID(2*b + 1))
			n += 2
		}
	}
	for s := range p.inv.nslots {
		if free[s] && !free[s^1] {
			take(chipID(s))
		}
	}
}

func (p *Plugin) preferShares(rest, out []string, size int, take func(string)) {
	bySlot := map[int][]string{}
	for _, d := range rest {
		ref, _ := p.inv.parse(kindShare, d)
		bySlot[ref.slot] = append(bySlot[ref.slot], d)
	}
	used, engine := p.inv.sharesBySlot(), p.inv.engines()
	for _, d := range out { // shares the request already holds count as used
		ref, _ := p.inv.parse(kindShare, d)
		used[ref.slot]++
	}
	need := size - len(out)
	var order []int
	for s := range bySlot {
		order = append(order, s)
	}
	sort.Slice(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if (used[a] > 0) != (used[b] > 0) {
			return used[a] > 0
		}
		if engine[a] != engine[b] {
			return engine[a]
		}
		if fa, fb := len(bySlot[a]) >= need, len(bySlot[b]) >= need; fa != fb {
			return fa
		}
		if len(bySlot[a]) != len(bySlot[b]) {
			return len(bySlot[a]) < len(bySlot[b])
		}
		return a < b
	})
	for _, s := range order {
		ids := bySlot[s]
		p.sortDevices(kindShare, ids)
		for _, d := range ids {
			take(d)
		}
	}
}

// sortDevices orders device IDs of kind k by slot, then share.
func (p *Plugin) sortDevices(k kind, ids []string) {
	key := func(d string) int {
		ref, _ := p.inv.parse(k, d)
		return ref.slot*maxShares + ref.share
	}
	sort.SliceStable(ids, func(i, j int) bool { return key(ids[i]) < key(ids[j]) })
}
