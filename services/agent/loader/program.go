package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/selftest"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// program streams every target's bitstream into its chip, self-tests the
// roles and commits; on any failure it wipes every target chip.
func (r *run) program(ctx context.Context, ts []*target, img agentapi.Image) (err error) {
	l := r.l
	st := l.cfg.Slots
	held := slotsOf(ts)
	defer func() {
		if err == nil {
			return
		}
		// Both chips or neither: wipe every target, whatever the context
		// says, so no slot is left half-loaded.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		if werr := st.ClearSlots(wctx, held); werr != nil {
			err = errors.Join(err, fmt.Errorf("rolling back: %w", werr))
		}
	}()
	want, err := slots.DigestBytes(img.Digest)
	if err != nil {
		return err
	}
	loading := slots.Record{State: agentapi.Loading, Image: &img, Tenant: r.req.Tenant.Name, TenantID: r.req.Tenant.ID,
		GrantID: r.grant.ID, Group: held, Pool: r.req.Pool}
	for _, s := range held {
		sl, _ := st.Slot(s)
		if err := sl.Chip.SetImageDigest([32]byte{}); err != nil {
			return err
		}
		l.checkpoint("zeroed %d", s)
	}
	if err := st.Set(held, loading); err != nil {
		return err
	}
	l.checkpoint("recorded loading")
	r.begin(agentapi.PhaseProgram)
	// Each chip has its own PCIe endpoint and configuration port, so the
	// chips of a two-chip image are unsealed and programmed in parallel.
	var total int64
	var done atomic.Int64
	for _, t := range ts {
		total += t.size
	}
	errs := make([]error, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() { errs[i] = r.programOne(ctx, t, total, &done) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	r.cur.Bytes = total
	r.begin(agentapi.PhaseSelfTest)
	roles := make([]*agentapi.Role, len(ts))
	for i, t := range ts {
		sl, _ := st.Slot(t.slot)
		if err := selftest.Loaded(ctx, sl.Chip, t.chip.Role.Name, t.chip.Role.Version); err != nil {
			return fail(agentapi.CodeSelfTest, "the slots were cleared; report the image to its ISV", "slot %d: %v", t.slot, err)
		}
		role, err := sl.Chip.Role()
		if err != nil {
			return err
		}
		roles[i] = &agentapi.Role{ID: role.ID, Version: fmt.Sprintf("%d.%d", role.Version>>16, role.Version&0xffff), Name: t.chip.Role.Name}
	}
	l.checkpoint("self-tested")
	for _, s := range held {
		sl, _ := st.Slot(s)
		if err := sl.Chip.SetImageDigest(want); err != nil {
			return err
		}
		l.checkpoint("digest %d", s)
	}
	now := time.Now().UTC()
	for i, t := range ts {
		rec := loading
		rec.State, rec.Role, rec.LoadedAt = agentapi.Loaded, roles[i], now
		if err := st.Set([]int{t.slot}, rec); err != nil {
			return err
		}
		l.checkpoint("recorded loaded %d", t.slot)
	}
	return nil
}

// programOne streams t's bitstream, unsealed on the way, into its chip. A
// layer not yet cached arrives from the registry as it is programmed: its
// digest is known only at its end, so the chip holds unverified bytes until
// the stream's Finish, and a mismatch fails the load (program wipes every
// target chip) with the digest error, whatever the chip made of the bytes.
func (r *run) programOne(ctx context.Context, t *target, total int64, done *atomic.Int64) error {
	l := r.l
	if t.stream == nil {
		// Another target of this load streams the layer: wait for it to
		// enter the cache.
		s, _, err := r.l.cfg.Cache.Stream(ctx, t.chip.Layer.String(), -1, func(context.Context) (io.ReadCloser, error) {
			return nil, errors.New("the layer's download ended without it")
		})
		if err != nil {
			return cacheErr(t.chip.Layer.String(), err)
		}
		t.stream = s
	}
	perr := r.programStream(ctx, t, total, done)
	if err := t.stream.Finish(); err != nil {
		return cacheErr(t.chip.Layer.String(), err)
	}
	if perr != nil {
		return perr
	}
	_ = l.cfg.Cache.AddUser(t.chip.Layer.String(), r.req.Tenant.Name)
	l.checkpoint("programmed %d", t.slot)
	return nil
}

func (r *run) programStream(ctx context.Context, t *target, total int64, done *atomic.Int64) error {
	l := r.l
	sl, _ := l.cfg.Slots.Slot(t.slot)
	half := t.size / 2
	var last int64
	var in io.Reader = &countingReader{r: t.stream, f: func(n int64) {
		r.progress(agentapi.PhaseProgram, done.Add(n-last), total)
		last = n
		if n >= half && half > 0 {
			half = 0
			l.checkpoint("streaming %d", t.slot)
		}
	}, step: func() { l.checkpoint("") }}
	if t.sealed {
		sr, err := seal.NewReader(in, t.key)
		if err != nil {
			return fail(agentapi.CodeSignature, "", "layer %s: %v", t.chip.Layer, err)
		}
		in = sr
	}
	if _, err := sl.Chip.Program(ctx, in, nil); err != nil {
		return fail(agentapi.CodeProgram, "the slots were cleared; retry, or report the board if it persists",
			"programming slot %d: %v", t.slot, err)
	}
	return nil
}

// countingReader counts the (sealed) bytes read from a layer.
type countingReader struct {
	r    io.Reader
	f    func(int64)
	step func() // before every read: lets a crash test freeze the stream
	n    int64
	m    int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.step()
	n, err := c.r.Read(p)
	c.n += int64(n)
	// Not every read, to keep progress cheap.
	if c.m++; c.m%64 == 0 || err == io.EOF {
		c.f(c.n)
	}
	return n, err
}
