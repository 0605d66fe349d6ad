package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas"
)

// marker is what a tenant wrote into a buffer of an attachment: once the
// attachment has ended and its node released it, no byte of it may be
// left in the chip's memory.
type marker struct {
	tenant, attachment, node string
	slot                     int
	addr                     uint64
	data                     []byte
}

// How a tenant ended an attachment.
const (
	endDetached  = "detached by the tenant"
	endVanished  = "vanished (lease left to expire)"
	endCut       = "ended under the tenant (lease lost or session cut)"
	endUndetach  = "detach failed (lease left to expire)"
	soakBufBytes = 4096
)

// record is an attachment as its tenant saw it.
type record struct {
	id, tenant string
	lease      time.Duration
	share      bool
	callStart  time.Time // before Attach was called
	attached   time.Time // when Attach returned it
	how        string    // one of the end… constants
	endStart   time.Time // the detach call began / the tenant vanished
	endDone    time.Time // the detach call returned
	// expires is the lease's end the registry last acknowledged: a
	// vanished attachment must not end before it.
	expires time.Time
}

// tenant is one goroutine attaching and using accelerators.
type tenant struct {
	s           *soak
	name, token string
	rng         *rand.Rand
}

// soakMaxAttaches bounds a tenant's loop whatever the duration.
const soakMaxAttaches = 100000

func (tn *tenant) run(ctx context.Context, stop time.Time) {
	for k := 0; k < soakMaxAttaches && ctx.Err() == nil && time.Now().Before(stop); k++ {
		tn.attachment(ctx, stop)
		sleepCtx(ctx, time.Duration(tn.rng.IntN(400))*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// attachment lives one attachment: attach (whole or shared, renewed by
// the SDK or, for one that will vanish, by hand), a few random
// operations, then detach or vanish.
func (tn *tenant) attachment(ctx context.Context, stop time.Time) {
	s, rng := tn.s, tn.rng
	reg := s.replicas[rng.IntN(len(s.replicas))].url // fixed addresses: safe to read
	vanish := rng.IntN(4) == 0
	share := rng.IntN(3) == 0
	listing := soakSingle
	if !share && rng.IntN(2) == 0 {
		listing = soakDual
	}
	lease := 10 * time.Second
	opts := []faas.AttachOption{faas.WithRegistryToken(tn.token), faas.WithLocalAgent("-")}
	if vanish {
		lease = 4 * time.Second
		opts = append(opts, faas.WithoutRenewal())
	}
	if share {
		opts = append(opts, faas.Shared())
	}
	opts = append(opts, faas.WithLease(lease))
	rec := &record{tenant: tn.name, lease: lease, share: share, callStart: time.Now()}
	actx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	a, err := faas.Attach(actx, reg, listing, opts...)
	cancel()
	if err != nil {
		tn.attachFailed(err)
		sleepCtx(ctx, time.Duration(200+rng.IntN(800))*time.Millisecond)
		return
	}
	rec.attached, rec.id, rec.expires = time.Now(), a.ID(), a.Info().LeaseExpiresAt
	s.mu.Lock()
	s.records = append(s.records, rec)
	s.mu.Unlock()
	s.stats.op("attach " + map[bool]string{false: "(whole) ", true: "(share) "}[share] + listing)

	var bufs []*ownBuf
	steps := 1 + rng.IntN(8)
	var opErr error
	for i := 0; i < steps && opErr == nil && ctx.Err() == nil && time.Now().Before(stop); i++ {
		if vanish && time.Until(rec.expires) < lease/2 {
			if opErr = a.Renew(ctx); opErr == nil {
				rec.expires = a.Info().LeaseExpiresAt
				s.stats.op("renew (by hand)")
			}
			continue
		}
		switch rng.IntN(4) {
		case 0, 1:
			var b *ownBuf
			if b, opErr = tn.writeMarker(ctx, a, len(bufs)); opErr == nil {
				bufs = append(bufs, b)
			}
		case 2:
			opErr = tn.reread(ctx, a, bufs)
		case 3:
			opErr = tn.job(ctx, a)
		}
		sleepCtx(ctx, time.Duration(rng.IntN(600))*time.Millisecond)
	}
	if opErr != nil {
		tn.opFailed(opErr)
	}
	tn.end(ctx, a, rec, vanish, opErr)
}

// end detaches, or vanishes: the device closed, the lease left to run out.
func (tn *tenant) end(ctx context.Context, a *faas.Attachment, rec *record, vanish bool, opErr error) {
	s := tn.s
	if vanish {
		a.Device().Close()
		rec.how, rec.endStart = endVanished, time.Now()
		if opErr != nil {
			rec.how = endCut
		}
		s.stats.op("vanish")
		return
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	rec.endStart = time.Now()
	err := a.Detach(dctx)
	rec.endDone = time.Now()
	switch {
	case err != nil:
		rec.how = endUndetach
		s.stats.inc(s.stats.opErrors, "detach: "+errKind(err))
	case opErr != nil:
		rec.how = endCut
		s.stats.op("detach")
	default:
		rec.how = endDetached
		s.stats.op("detach")
	}
}

func (tn *tenant) attachFailed(err error) {
	s, kind := tn.s, errKind(err)
	s.stats.inc(s.stats.attachFails, kind)
	if kind == "no room in the pool" || kind == "unavailable" || kind == "canceled (soak over)" {
		return // the pool full, or a replica being restarted
	}
	// Anything else is worth a look: noted, with the attachments tried,
	// whose records the summary shows.
	var ids []string
	var ae *faas.AttachError
	if errors.As(err, &ae) {
		for _, at := range ae.Attempts {
			if at.Attachment != "" {
				ids = append(ids, at.Attachment)
			}
		}
	}
	s.mu.Lock()
	s.notes = append(s.notes, note{what: fmt.Sprintf("%s: attach %s", tn.name, err), attachments: ids})
	s.mu.Unlock()
}

func (tn *tenant) opFailed(err error) {
	tn.s.stats.inc(tn.s.stats.opErrors, errKind(err))
}

// errKind names an error's kind for the summary.
func errKind(err error) string {
	for _, k := range []struct {
		err  error
		name string
	}{{faas.ErrNoCapacity, "no room in the pool"}, {faas.ErrLeaseLost, "lease lost"}, {faas.ErrAttachFailed, "node failed to load"},
		{faas.ErrClosed, "session closed"}, {faas.ErrUnavailable, "unavailable"}, {context.DeadlineExceeded, "timed out"},
		{context.Canceled, "canceled (soak over)"}} {
		if errors.Is(err, k.err) {
			return k.name
		}
	}
	msg := err.Error()
	if len(msg) > 60 {
		msg = msg[:60]
	}
	return "other: " + msg
}

// ownBuf is a buffer holding the tenant's marker.
type ownBuf struct {
	b    *faas.Buffer
	data []byte
}

// markerBytes fills a buffer with a text unique to the tenant, the
// attachment and the buffer, so that a leak names its source.
func (tn *tenant) markerBytes(att string, k int) []byte {
	m := fmt.Sprintf("SOAK|%s|%s|buf%d|", tn.name, att, k)
	return []byte(strings.Repeat(m, soakBufBytes/len(m)+1)[:soakBufBytes])
}

// writeMarker allocates a buffer, checks that it reads as zeros (nothing
// of anyone before), writes the marker and reads it back.
func (tn *tenant) writeMarker(ctx context.Context, a *faas.Attachment, k int) (*ownBuf, error) {
	s, dev, info := tn.s, a.Device(), a.Info()
	b, err := dev.Alloc(ctx, soakBufBytes)
	if err != nil {
		return nil, err
	}
	got := make([]byte, soakBufBytes)
	if err := b.Read(ctx, got, 0); err != nil {
		return nil, err
	}
	if nz := soakBufBytes - bytes.Count(got, []byte{0}); nz != 0 {
		s.violate("%s: a new buffer of attachment %s (%s slot %d at %#x) holds %d non-zero bytes: %q",
			tn.name, a.ID(), info.Node, info.Slot, b.Addr(), nz, leakSample(got))
	} else {
		s.stats.check("a new buffer reads as zeros")
	}
	data := tn.markerBytes(a.ID(), k)
	// Recorded before the write: a write cut by a fault may still have
	// landed.
	s.mu.Lock()
	s.markers = append(s.markers, marker{tenant: tn.name, attachment: a.ID(), node: info.Node, slot: info.Slot, addr: b.Addr(), data: data})
	s.mu.Unlock()
	if err := b.Write(ctx, data, 0); err != nil {
		return nil, err
	}
	s.stats.op("write marker")
	ob := &ownBuf{b: b, data: data}
	return ob, tn.reread(ctx, a, []*ownBuf{ob})
}

// reread reads the tenant's buffers back: each must hold its marker,
// nothing of anyone else's and not zeros (the node must not scrub live
// memory).
func (tn *tenant) reread(ctx context.Context, a *faas.Attachment, bufs []*ownBuf) error {
	s := tn.s
	got := make([]byte, soakBufBytes)
	for _, ob := range bufs {
		if err := ob.b.Read(ctx, got, 0); err != nil {
			return err
		}
		if !bytes.Equal(got, ob.data) {
			s.violate("%s: buffer at %#x of attachment %s reads back %q, not its marker", tn.name, ob.b.Addr(), a.ID(), leakSample(got))
		} else {
			s.stats.check("a buffer reads back its own marker")
		}
		s.stats.op("read marker back")
	}
	return nil
}

// leakSample is the start of the first non-zero run of data, for a message.
func leakSample(data []byte) string {
	i := bytes.IndexFunc(data, func(r rune) bool { return r != 0 })
	if i < 0 {
		return ""
	}
	return string(data[i:min(len(data), i+80)])
}

// job runs a FINISH-only program: the engine's round trip.
func (tn *tenant) job(ctx context.Context, a *faas.Attachment) error {
	dev := a.Device()
	prog, err := dev.Program(ctx, []isa.Insn{{Op: isa.OpFinish, JobID: uint32(tn.rng.IntN(1000) + 1)}})
	if err != nil {
		return err
	}
	j, err := dev.Queue().Submit(ctx, prog)
	if err != nil {
		return err
	}
	if _, err := j.Wait(ctx); err != nil {
		return err
	}
	tn.s.stats.op("job (FINISH)")
	return nil
}
