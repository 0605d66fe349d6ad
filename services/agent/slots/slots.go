// Package slots is the node agent's table of slots: one per chip of every
// board, numbered board*2+chip across the host, with the state AWS's
// fpga-describe-local-image reports (cleared, loading, loaded, failed, busy),
// who loaded what, and the operations that change it.
//
// # Where the truth lives
//
// A slot's record is kept in a state file (written atomically at every
// change) and, for what matters most, in the chip itself: the shell's
// image-digest scratch register holds the manifest digest of the loaded
// image and is written only after a load's self-test passed, and zeroed
// before anything else touches the chip. Reconcile, run at start, trusts a
// loaded record only if every chip of its load group still carries the
// record's digest and the image is still verified in the node cache;
// everything else is cleared. So whatever point a crash hits, no slot reports
// an image other than the one on its chip.
//
// # Clearing
//
// Clear zeroes the digest register, closes every tenant window, loads the
// blank role and scrubs the chip's whole DDR before the slot is offered to
// anyone else, as AWS's clear wipes on- and off-chip memory.
package slots

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/shell"
)

// Error categories.
var (
	// ErrBusy: another operation holds the slot, or it is not free for the
	// caller.
	ErrBusy = errors.New("slot busy")
	// ErrNotFound: no such slot.
	ErrNotFound = errors.New("no such slot")
)

// Record is what the agent knows of a slot.
type Record struct {
	State    agentapi.SlotState `json:"state"`
	Reason   string             `json:"reason,omitempty"`
	Image    *agentapi.Image    `json:"image,omitempty"`
	Role     *agentapi.Role     `json:"role,omitempty"`
	Tenant   string             `json:"tenant,omitempty"`
	TenantID string             `json:"tenant_id,omitempty"`
	// GrantID is the registry's load grant the image was loaded under;
	// usage reports of the slot (its clear) must name it.
	GrantID string `json:"grant_id,omitempty"`
	// Group lists the slots loaded together with this one (itself
	// included); a two-chip image is loaded or cleared as one.
	Group    []int     `json:"group,omitempty"`
	LoadedAt time.Time `json:"loaded_at,omitzero"`
	// Pool is the accelerator pool's hold on a slot it loaded; nil for
	// a slot a tenant loaded itself.
	Pool *Pool `json:"pool,omitempty"`
}

// Pool is the accelerator pool's hold on a slot it loaded for an
// attachment. It lives in the record, written with it, so that an agent
// restarted still knows which slots are the pool's to clear and until
// when one is kept warm; a load or a clear, which replace the record,
// end it.
type Pool struct {
	// Attachment is the attachment the slot was loaded for, or the
	// last one that let it go.
	Attachment string `json:"attachment"`
	// WarmUntil, set after a detach, is when the slot kept loaded for
	// the attachment's tenant is to be cleared, unless an attachment
	// holds it then (one that took it warm leaves the deadline as it is).
	WarmUntil time.Time `json:"warm_until,omitzero"`
}

// Slot is one chip with its board.
type Slot struct {
	Index int
	Board *device.Board
	Chip  *device.Chip
}

// Table is the host's slots.
type Table struct {
	path  string
	slots []Slot

	mu    sync.Mutex
	recs  []Record
	holds []string // operation holding each slot, "" when free
}

// Open builds the table of boards' chips and reads the state file at path
// (missing: no records). Call Reconcile before serving.
func Open(boards []*device.Board, path string) (*Table, error) {
	t := &Table{path: path}
	for _, b := range boards {
		for _, c := range b.Chips {
			t.slots = append(t.slots, Slot{Index: len(t.slots), Board: b, Chip: c})
		}
	}
	t.recs = make([]Record, len(t.slots))
	t.holds = make([]string, len(t.slots))
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("slots: %w", err)
	default:
		var saved []Record
		if err := json.Unmarshal(data, &saved); err != nil {
			// A state file is only ever replaced whole, so a bad one was
			// not written by us; Reconcile clears every slot then.
			saved = nil
		}
		for i := range min(len(saved), len(t.recs)) {
			t.recs[i] = saved[i]
		}
	}
	return t, nil
}

// Len is the number of slots.
func (t *Table) Len() int { return len(t.slots) }

// Slot returns slot i.
func (t *Table) Slot(i int) (Slot, error) {
	if i < 0 || i >= len(t.slots) {
		return Slot{}, fmt.Errorf("%w: %d (the host has %d)", ErrNotFound, i, len(t.slots))
	}
	return t.slots[i], nil
}

// Record returns slot i's record.
func (t *Table) Record(i int) Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.recs[i]
}

// Held reports whether an operation holds slot i.
func (t *Table) Held(i int) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.holds[i] != ""
}

// Acquire reserves slots for operation op after check accepts each slot's
// current record; it fails with ErrBusy if another operation holds one.
// Release gives them back.
func (t *Table) Acquire(op string, slots []int, check func(i int, r Record) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range slots {
		if i < 0 || i >= len(t.slots) {
			return fmt.Errorf("%w: %d (the host has %d)", ErrNotFound, i, len(t.slots))
		}
		if t.holds[i] != "" {
			return fmt.Errorf("%w: slot %d: another operation is in progress on it", ErrBusy, i)
		}
		if check != nil {
			if err := check(i, t.recs[i]); err != nil {
				return err
			}
		}
	}
	for _, i := range slots {
		t.holds[i] = op
	}
	return nil
}

// Release frees slots held by op.
func (t *Table) Release(op string, slots []int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range slots {
		if t.holds[i] == op {
			t.holds[i] = ""
		}
	}
}

// Set records r for the given slots and writes the state file.
func (t *Table) Set(slots []int, r Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range slots {
		t.recs[i] = r
	}
	return t.saveLocked()
}

// SetPool records the pool's hold p (nil: none) on those of slots that
// are loaded, and writes the state file.
func (t *Table) SetPool(slots []int, p *Pool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, i := range slots {
		if i < 0 || i >= len(t.recs) {
			return fmt.Errorf("%w: %d (the host has %d)", ErrNotFound, i, len(t.recs))
		}
		if st := t.recs[i].State; st != agentapi.Loaded && st != agentapi.Busy {
			continue
		}
		if p == nil {
			t.recs[i].Pool = nil
		} else {
			c := *p
			t.recs[i].Pool = &c
		}
	}
	return t.saveLocked()
}

// Snapshot returns every record, indexed by slot.
func (t *Table) Snapshot() []Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.recs)
}

func (t *Table) saveLocked() error {
	data, err := json.MarshalIndent(t.recs, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(t.path, data, 0o600); err != nil {
		return fmt.Errorf("slots: state file: %w", err)
	}
	return nil
}

// Wipe brings one chip to the cleared state: digest register zeroed first
// (so an interrupted wipe is redone at the next start), every tenant window
// closed, the blank role loaded and the whole DDR scrubbed.
func Wipe(ctx context.Context, c *device.Chip) error {
	if err := c.SetImageDigest([32]byte{}); err != nil {
		return fmt.Errorf("chip %d: zeroing the image digest: %w", c.Index(), err)
	}
	for n := range shell.Windows {
		if err := c.SetWindow(n, 0, 0); err != nil {
			return fmt.Errorf("chip %d: closing window %d: %w", c.Index(), n, err)
		}
	}
	bit, err := blank.Bitstream(c.Part())
	if err != nil {
		return fmt.Errorf("chip %d: blank role: %w", c.Index(), err)
	}
	if _, err := c.Program(ctx, bytes.NewReader(bit), nil); err != nil {
		return fmt.Errorf("chip %d: loading the blank role: %w", c.Index(), err)
	}
	if err := c.Scrub(ctx); err != nil {
		return fmt.Errorf("chip %d: scrubbing DDR: %w", c.Index(), err)
	}
	return nil
}

// ClearSlots wipes the chips of slots (held by the caller) and records
// them cleared; a chip that cannot be wiped is recorded failed with the
// reason.
func (t *Table) ClearSlots(ctx context.Context, slots []int) error {
	var errs []error
	for _, i := range slots {
		r := Record{State: agentapi.Cleared, Role: blankRole}
		if err := Wipe(ctx, t.slots[i].Chip); err != nil {
			r = Record{State: agentapi.Failed, Reason: "clear failed: " + err.Error()}
			errs = append(errs, fmt.Errorf("slot %d: %w", i, err))
		}
		if err := t.Set([]int{i}, r); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

var blankRole = &agentapi.Role{ID: blank.ID, Version: "1.0", Name: blank.Name}

// Reconcile compares the records with the chips after a start: a loaded
// record stands only if every chip of its group holds the record's digest
// in its digest register, its role is the recorded one, and verified
// accepts the image digest (the image is still verified in the node cache).
// A cleared record stands if the chip has the blank role and a zero digest.
// Every other slot is wiped and recorded cleared (or failed, if the wipe
// fails). It returns the slots it wiped.
func (t *Table) Reconcile(ctx context.Context, verified func(digest string) bool) ([]int, error) {
	recs := t.Snapshot()
	keep := make([]bool, len(recs))
	for i, r := range recs {
		switch r.State {
		case agentapi.Loaded, agentapi.Busy:
			keep[i] = t.groupIntact(i, r, recs, verified)
			if keep[i] && r.State == agentapi.Busy {
				recs[i].State = agentapi.Loaded // sessions did not survive
			}
		case agentapi.Cleared:
			keep[i] = t.chipBlank(i)
		}
	}
	var wiped []int
	var errs []error
	for i := range recs {
		if keep[i] {
			if err := t.Set([]int{i}, recs[i]); err != nil {
				return wiped, err
			}
			continue
		}
		wiped = append(wiped, i)
		if err := t.ClearSlots(ctx, []int{i}); err != nil {
			errs = append(errs, err)
		}
	}
	return wiped, errors.Join(errs...)
}

func (t *Table) groupIntact(i int, r Record, recs []Record, verified func(string) bool) bool {
	if r.Image == nil || len(r.Group) == 0 || !slices.Contains(r.Group, i) || !verified(r.Image.Digest) {
		return false
	}
	want, err := DigestBytes(r.Image.Digest)
	if err != nil {
		return false
	}
	for _, j := range r.Group {
		if j < 0 || j >= len(recs) || recs[j].Image == nil || recs[j].Image.Digest != r.Image.Digest {
			return false
		}
		c := t.slots[j].Chip
		got, err := c.ImageDigest()
		if err != nil || got != want {
			return false
		}
		role, err := c.Role()
		if err != nil || recs[j].Role == nil || role.ID != recs[j].Role.ID {
			return false
		}
	}
	return true
}

func (t *Table) chipBlank(i int) bool {
	c := t.slots[i].Chip
	d, err := c.ImageDigest()
	if err != nil || d != [32]byte{} {
		return false
	}
	role, err := c.Role()
	return err == nil && role.ID == blank.ID
}
