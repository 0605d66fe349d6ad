package deviceplugin

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Resource names.
const (
	ResourceChip  = "faas.dev/chip"
	ResourceBoard = "faas.dev/board"
	ResourceShare = "faas.dev/alidnn-share"
)

// Error categories of Allocate, checked with errors.Is.
var (
	// ErrUnknownDevice: a device ID this plugin does not advertise.
	ErrUnknownDevice = errors.New("unknown device")
	// ErrConflict: a chip of the request is allocated under another
	// resource.
	ErrConflict = errors.New("chip already allocated")
)

// kind is one of the three resources.
type kind int

const (
	kindChip kind = iota
	kindBoard
	kindShare
	numKinds
)

var kindNames = [numKinds]string{ResourceChip, ResourceBoard, ResourceShare}

func (k kind) String() string { return kindNames[k] }

// chipState is what the health monitor last saw of one slot.
type chipState struct {
	healthy bool
	reason  string // why not, for the log
	alidnn  bool   // loaded with the AliDNN engine: shares may be offered
	// onDemand: empty, or being loaded for shares, with Config.Engines
	// set: shares may be offered, the engine loaded when one starts.
	onDemand bool
}

// allocation is one container's devices of one resource.
type allocation struct {
	id      string
	kind    kind
	devices []string
	slots   []int       // whole slots (chip, board)
	shares  map[int]int // shares by slot
	at      time.Time
	granted bool // a credential was issued (false: adopted from PodResources)
}

// inventory is the plugin's record of the chips it hands the kubelet: their
// health, and their allocations under all three resources, kept together
// because the three are views of the same chips.
type inventory struct {
	nslots, shares int

	mu     sync.Mutex
	health []chipState
	allocs map[string]*allocation
	owner  [numKinds]map[string]string // device ID → allocation id
	gen    chan struct{}               // closed and replaced at every change
}

func newInventory(nslots, shares int) *inventory {
	inv := &inventory{nslots: nslots, shares: shares, health: make([]chipState, nslots), allocs: map[string]*allocation{},
		gen: make(chan struct{})}
	for k := range inv.owner {
		inv.owner[k] = map[string]string{}
	}
	return inv
}

// changed returns a channel closed at the next change.
func (inv *inventory) changed() <-chan struct{} {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.gen
}

// bumpLocked wakes every watcher. Callers hold mu.
func (inv *inventory) bumpLocked() {
	close(inv.gen)
	inv.gen = make(chan struct{})
}

// setHealth records the monitor's view; it reports the slots that changed.
func (inv *inventory) setHealth(states []chipState) []int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	var diff []int
	for i, s := range states {
		if inv.health[i] != s {
			diff = append(diff, i)
			inv.health[i] = s
		}
	}
	if diff != nil {
		inv.bumpLocked()
	}
	return diff
}

// Device IDs.

func chipID(slot int) string         { return "slot-" + strconv.Itoa(slot) }
func boardID(board int) string       { return "board-" + strconv.Itoa(board) }
func shareID(slot, share int) string { return fmt.Sprintf("slot-%d-share-%d", slot, share) }

// devRef is what a device ID names: whole slots (chip, board), or one
// share of a slot.
type devRef struct {
	slots       []int
	slot, share int
}

// parse reads a device ID of kind k.
func (inv *inventory) parse(k kind, id string) (devRef, error) {
	bad := fmt.Errorf("%w: %s has no device %q", ErrUnknownDevice, k, id)
	num := func(s string, max int) (int, bool) {
		n, err := strconv.Atoi(s)
		return n, err == nil && n >= 0 && n < max && strconv.Itoa(n) == s
	}
	switch k {
	case kindChip:
		s, ok := strings.CutPrefix(id, "slot-")
		n, okn := num(s, inv.nslots)
		if !ok || !okn {
			return devRef{}, bad
		}
		return devRef{slots: []int{n}, slot: n}, nil
	case kindBoard:
		s, ok := strings.CutPrefix(id, "board-")
		n, okn := num(s, inv.nslots/2)
		if !ok || !okn {
			return devRef{}, bad
		}
		return devRef{slots: []int{2 * n, 2*n + 1}, slot: 2 * n}, nil
	default:
		s, ok := strings.CutPrefix(id, "slot-")
		a, b, okc := strings.Cut(s, "-share-")
		n, okn := num(a, inv.nslots)
		m, oks := num(b, inv.shares)
		if !ok || !okc || !okn || !oks {
			return devRef{}, bad
		}
		return devRef{slot: n, share: m}, nil
	}
}

// newAllocation builds the allocation of device IDs ids of kind k.
func (inv *inventory) newAllocation(id string, k kind, ids []string) (*allocation, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("%w: %s: no devices requested", ErrUnknownDevice, k)
	}
	a := &allocation{id: id, kind: k, devices: slices.Clone(ids), at: time.Now()}
	seen := map[string]bool{}
	for _, d := range ids {
		if seen[d] {
			return nil, fmt.Errorf("%w: %s: device %q requested twice", ErrUnknownDevice, k, d)
		}
		seen[d] = true
		ref, err := inv.parse(k, d)
		if err != nil {
			return nil, err
		}
		if k == kindShare {
			if a.shares == nil {
				a.shares = map[int]int{}
			}
			a.shares[ref.slot]++
			continue
		}
		a.slots = append(a.slots, ref.slots...)
	}
	sort.Ints(a.slots)
	return a, nil
}

// usageLocked is, per slot, the kind holding it whole (-1: none) and its
// allocated shares, leaving out the allocations in skip.
func (inv *inventory) usageLocked(skip map[string]bool) (whole []kind, shares []int) {
	whole, shares = make([]kind, inv.nslots), make([]int, inv.nslots)
	for i := range whole {
		whole[i] = -1
	}
	for _, a := range inv.allocs {
		if skip[a.id] {
			continue
		}
		for _, s := range a.slots {
			whole[s] = a.kind
		}
		for s, n := range a.shares {
			shares[s] += n
		}
	}
	return whole, shares
}

// conflictsLocked explains why a cannot be added beside the allocations not
// in skip, or returns nil.
func (inv *inventory) conflictsLocked(a *allocation, skip map[string]bool) error {
	whole, shares := inv.usageLocked(skip)
	for _, s := range a.slots {
		switch {
		case shares[s] > 0:
			return fmt.Errorf("%w: slot %d has %d %s device(s) allocated", ErrConflict, s, shares[s], ResourceShare)
		case whole[s] >= 0 && whole[s] != a.kind:
			return fmt.Errorf("%w: slot %d is allocated as %s", ErrConflict, s, whole[s])
		}
	}
	for s := range a.shares {
		if whole[s] >= 0 {
			return fmt.Errorf("%w: slot %d is allocated as %s", ErrConflict, s, whole[s])
		}
	}
	return nil
}

// supersededLocked lists the allocations of a's kind holding any of a's
// devices: the kubelet has handed those devices on.
func (inv *inventory) supersededLocked(a *allocation) map[string]bool {
	out := map[string]bool{}
	for _, d := range a.devices {
		if id, ok := inv.owner[a.kind][d]; ok {
			out[id] = true
		}
	}
	return out
}

// add records a, dropping the allocations it supersedes, whose ids it
// returns; it fails with ErrConflict if another resource holds its chips.
func (inv *inventory) add(a *allocation) (dropped []string, err error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	skip := inv.supersededLocked(a)
	if err := inv.conflictsLocked(a, skip); err != nil {
		return nil, err
	}
	for id := range skip {
		inv.removeLocked(id)
		dropped = append(dropped, id)
	}
	inv.allocs[a.id] = a
	for _, d := range a.devices {
		inv.owner[a.kind][d] = a.id
	}
	inv.bumpLocked()
	return dropped, nil
}

// conflicts reports whether a would conflict now.
func (inv *inventory) conflicts(a *allocation) error {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.conflictsLocked(a, inv.supersededLocked(a))
}

func (inv *inventory) removeLocked(id string) {
	a := inv.allocs[id]
	if a == nil {
		return
	}
	delete(inv.allocs, id)
	for _, d := range a.devices {
		if inv.owner[a.kind][d] == id {
			delete(inv.owner[a.kind], d)
		}
	}
}

// devices is what ListAndWatch reports for kind k now.
func (inv *inventory) devices(k kind) []*pluginapi.Device {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	whole, shares := inv.usageLocked(nil)
	health := func(ok bool) string {
		if ok {
			return pluginapi.Healthy
		}
		return pluginapi.Unhealthy
	}
	var out []*pluginapi.Device
	switch k {
	case kindChip:
		for s := range inv.nslots {
			ok := inv.health[s].healthy && shares[s] == 0 && whole[s] != kindBoard
			out = append(out, &pluginapi.Device{ID: chipID(s), Health: health(ok)})
		}
	case kindBoard:
		for b := range inv.nslots / 2 {
			ok := true
			for _, s := range []int{2 * b, 2*b + 1} {
				ok = ok && inv.health[s].healthy && shares[s] == 0 && whole[s] != kindChip
			}
			out = append(out, &pluginapi.Device{ID: boardID(b), Health: health(ok)})
		}
	case kindShare:
		for s := range inv.nslots {
			ok := inv.health[s].healthy && (inv.health[s].alidnn || inv.health[s].onDemand) && whole[s] < 0
			for n := range inv.shares {
				out = append(out, &pluginapi.Device{ID: shareID(s, n), Health: health(ok)})
			}
		}
	}
	return out
}

// snapshot returns the allocations, for release and tests.
func (inv *inventory) snapshot() []allocation {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]allocation, 0, len(inv.allocs))
	for _, a := range inv.allocs {
		out = append(out, *a)
	}
	return out
}

// remove drops the allocations ids.
func (inv *inventory) remove(ids []string) {
	if len(ids) == 0 {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, id := range ids {
		inv.removeLocked(id)
	}
	inv.bumpLocked()
}

// owned reports whether device d of kind k belongs to an allocation.
func (inv *inventory) owned(k kind, d string) bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, ok := inv.owner[k][d]
	return ok
}

// usage is, per slot, the kind holding it whole (-1: none) and its
// allocated shares.
func (inv *inventory) usage() (whole []kind, shares []int) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.usageLocked(nil)
}

// engines reports, per slot, whether the monitor last saw it hold an
// AliDNN engine.
func (inv *inventory) engines() []bool {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]bool, inv.nslots)
	for s, h := range inv.health {
		out[s] = h.alidnn
	}
	return out
}

// sharesBySlot is the number of shares allocated on each slot.
func (inv *inventory) sharesBySlot() []int {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	_, shares := inv.usageLocked(nil)
	return shares
}
