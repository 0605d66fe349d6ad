package loader

// Placement: which free, compatible slots a load takes, and holding them.

import (
	"errors"
	"fmt"
	"strings"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/validate"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/slots"
	"github.com/fpga-faas/faas/shell"
)

// place chooses the slots of a load and checks each against its chip.
func (l *Loader) place(cfg image.Config, req Request) ([]*target, error) {
	st := l.cfg.Slots
	both := cfg.BothChipsRequired || len(cfg.Chips) > 1
	if len(cfg.Chips) == 0 || len(cfg.Chips) > shell.ChipsPerBoard {
		return nil, fail(agentapi.CodeBadRequest, "", "image has %d chips", len(cfg.Chips))
	}
	candidates := func(first int) []int {
		if both {
			b := first - first%shell.ChipsPerBoard
			return []int{b, b + 1}
		}
		return []int{first}
	}
	try := func(first int) ([]*target, error) {
		set := candidates(first)
		var ts []*target
		for k, s := range set {
			sl, err := st.Slot(s)
			if err != nil {
				return nil, fail(agentapi.CodeNotFound, "see `faas status` for the slots of this host", "%v", err)
			}
			var ch image.Chip
			if both {
				ch = chipFor(cfg, k)
			} else {
				ch = cfg.Chips[0]
				if ch.Index != image.AnyChip && int(ch.Index) != sl.Chip.Index() {
					return nil, fail(agentapi.CodeIncompatible, "pick a slot on chip "+fmt.Sprint(int(ch.Index)),
						"the image's bitstream is for chip %d of a board; slot %d is chip %d", ch.Index, s, sl.Chip.Index())
				}
			}
			if err := compatible(cfg, ch, sl); err != nil {
				return nil, err
			}
			ts = append(ts, &target{slot: s, chip: ch, sealed: ch.Sealed})
		}
		return ts, nil
	}
	if req.Slot != nil {
		return try(*req.Slot)
	}
	var firstErr error
	for s := 0; s < st.Len(); s++ {
		set := candidates(s)
		if set[0] != s && both {
			continue
		}
		free := true
		for _, i := range set {
			if st.Held(i) || !freeFor(st.Record(i), req.Tenant.Name) || st.Record(i).State == agentapi.Loaded || req.reserved(i) {
				free = false
			}
		}
		if !free {
			continue
		}
		ts, err := try(s)
		if err == nil {
			return ts, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if firstErr != nil {
		return nil, firstErr
	}
	return nil, fail(agentapi.CodeBusy, "clear a slot with `faas clear SLOT`, or name one with --slot",
		"no free slot on this host fits the image (%d chip(s))", len(cfg.Chips))
}

// chipFor returns the image chip for board chip k of a two-chip load.
func chipFor(cfg image.Config, k int) image.Chip {
	for _, c := range cfg.Chips {
		if int(c.Index) == k {
			return c
		}
	}
	if k < len(cfg.Chips) {
		return cfg.Chips[k]
	}
	return cfg.Chips[0]
}

// compatible checks an image chip against the slot's chip and board.
func compatible(cfg image.Config, ch image.Chip, sl slots.Slot) error {
	c := sl.Chip
	if ch.Part != c.Part().Name {
		return fail(agentapi.CodeIncompatible, "load an image built for "+c.Part().Name,
			"slot %d is a %s; the image's bitstream for chip %d is for %s", sl.Index, c.Part().Name, ch.Index, ch.Part)
	}
	if cfg.Board != sl.Board.Model.Name {
		return fail(agentapi.CodeIncompatible, "load an image built for board "+sl.Board.Model.Name,
			"slot %d is on a %s board; the image is for %s", sl.Index, sl.Board.Model.Name, cfg.Board)
	}
	v := c.ShellVersion()
	ok, err := validate.ShellAccepts(cfg.Shell.Versions, v)
	if err != nil || !ok || cfg.Shell.Name != shell.Name {
		return fail(agentapi.CodeIncompatible, "load a version of the image built for this shell",
			"slot %d runs %s %d.%d; the image accepts %s %s", sl.Index, shell.Name, v>>16, v&0xffff, cfg.Shell.Name, cfg.Shell.Versions)
	}
	iface := c.InterfaceUUID()
	if strings.ReplaceAll(cfg.Shell.InterfaceUUID, "-", "") != fmt.Sprintf("%x", iface[:]) {
		return fail(agentapi.CodeIncompatible, "load a version of the image built for this shell",
			"slot %d's PR interface is %x; the image was built for %s", sl.Index, iface[:], cfg.Shell.InterfaceUUID)
	}
	return nil
}

// freeFor reports whether a slot may be loaded by tenant: cleared or failed
// slots by anyone, a loaded one only by the tenant that loaded it (it is
// replaced).
func freeFor(r slots.Record, tenant string) bool {
	switch r.State {
	case agentapi.Cleared, agentapi.Failed, "":
		return true
	case agentapi.Loaded:
		return r.Tenant == tenant
	}
	return false
}

// hold takes the target slots for the load and records them loading.
func (l *Loader) hold(req Request, ts []*target, img agentapi.Image) error {
	held := slotsOf(ts)
	err := l.cfg.Slots.Acquire(req.ID, held, func(i int, r slots.Record) error {
		if !freeFor(r, req.Tenant.Name) {
			return fail(agentapi.CodeBusy, "clear it first, or load onto another slot",
				"slot %d is %s by another tenant", i, r.State)
		}
		if req.reserved(i) {
			return fail(agentapi.CodeBusy, "detach the attachment first, or load onto another slot",
				"slot %d is held by an attachment of the accelerator pool", i)
		}
		return nil
	})
	if err != nil {
		var le *Error
		if errors.As(err, &le) {
			return err
		}
		if errors.Is(err, slots.ErrNotFound) {
			return fail(agentapi.CodeNotFound, "", "%v", err)
		}
		return fail(agentapi.CodeBusy, "wait for it to finish", "%v", err)
	}
	return nil
}

func (req Request) reserved(i int) bool { return req.Reserved != nil && req.Reserved(i) }

func slotsOf(ts []*target) []int {
	var out []int
	for _, t := range ts {
		out = append(out, t.slot)
	}
	return out
}
