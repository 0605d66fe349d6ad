package faas

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// syncChunk is the part of a local Write or Read handed to faasd at once:
// the SDK copies the next chunk while the agent moves this one, so the two
// copies of a transfer overlap.
const syncChunk = 4 << 20

// readAhead is how many chunks of a local Read the agent is asked for
// ahead of the copy out.
const readAhead = 3

// SyncDir is the direction of Buffer.Sync.
type SyncDir int

// Sync directions.
const (
	ToDevice   SyncDir = session.ToDevice   // host memory (Bytes) → device
	FromDevice SyncDir = session.FromDevice // device → host memory (Bytes)
)

// Buffer is device memory of a session, allocated by Device.Alloc. Programs
// address it by Addr. On the local path it also has host memory shared with
// faasd (Bytes), which Sync moves to and from the device, as XRT's bo.sync.
type Buffer struct {
	d      *Device
	handle uint64
	addr   uint64
	size   int64

	mu    sync.RWMutex // Free takes it to unmap; transfers hold it shared
	mem   []byte       // staging memory, local path
	freed bool
}

// Alloc allocates size bytes of device memory (rounded up to 64) in the
// session's window. Over the tenant's quota it fails with ErrQuota.
func (d *Device) Alloc(ctx context.Context, size int64) (*Buffer, error) {
	if size <= 0 || size > session.MaxBuffer {
		return nil, &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("buffer of %d bytes", size)}
	}
	r, err := d.do(ctx, session.OpAlloc, session.U64s(uint64(size)))
	if err != nil {
		return nil, err
	}
	ar, err := session.ParseAllocReply(r.payload)
	if err == nil && (ar.Size < uint64(size) || ar.Size > session.MaxBuffer) {
		err = fmt.Errorf("%w: buffer of %d bytes for %d", session.ErrFrame, ar.Size, size)
	}
	b := &Buffer{d: d, handle: ar.Handle, addr: ar.Addr, size: int64(ar.Size)}
	switch {
	case err != nil:
	case d.Local() && r.fd < 0:
		err = errors.New("staging memory missing")
	case d.Local():
		if ar.Staging < ar.Size {
			err = fmt.Errorf("staging memory of %d bytes for %d", ar.Staging, ar.Size)
		} else {
			b.mem, err = session.MapFD(r.fd, ar.Staging)
			r.fd = -1
		}
	}
	if r.fd >= 0 {
		closeFD(r.fd)
	}
	if err != nil {
		return nil, fmt.Errorf("faas: alloc: %w", err)
	}
	d.mu.Lock()
	if d.closed {
		err := d.endedErr()
		d.mu.Unlock()
		b.unmap()
		return nil, err
	}
	d.bufs[b] = struct{}{}
	d.mu.Unlock()
	if r := d.recorder(); r != nil {
		r.RecordAlloc(b.addr, b.size)
	}
	return b, nil
}

// Addr is the buffer's device address, for programs' LOAD and STORE.
func (b *Buffer) Addr() uint64 { return b.addr }

// Size is the buffer's size in bytes: the size asked for, rounded up to 64.
func (b *Buffer) Size() int64 { return b.size }

// Bytes is the buffer's host memory shared with faasd on the local path,
// Size bytes; nil over https. Move it to and from the device with Sync. It
// is unmapped by Free and by Device.Close: touching it afterwards crashes.
func (b *Buffer) Bytes() []byte {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.mem == nil {
		return nil
	}
	return b.mem[:b.size:b.size]
}

func (b *Buffer) check(off, n int64) error {
	if b.freed {
		return &Error{Code: agentapi.CodeBadHandle, Message: "buffer freed"}
	}
	if off < 0 || n < 0 || off > b.size || n > b.size-off {
		return &Error{Code: agentapi.CodeOutOfRange, Message: fmt.Sprintf("%d bytes at %d of a %d-byte buffer", n, off, b.size)}
	}
	return nil
}

// Write copies p to the device at offset off of the buffer; when it returns,
// the bytes are in device memory.
func (b *Buffer) Write(ctx context.Context, p []byte, off int64) error {
	err := b.write(ctx, p, off)
	if r := b.d.recorder(); r != nil && err == nil {
		r.RecordWrite(b.addr, off, p)
	}
	return err
}

func (b *Buffer) write(ctx context.Context, p []byte, off int64) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.check(off, int64(len(p))); err != nil {
		return err
	}
	if b.mem == nil {
		for len(p) > 0 {
			n := min(len(p), session.MaxData)
			if _, err := b.d.do(ctx, session.OpWrite, session.U64s(b.handle, uint64(off)), p[:n]); err != nil {
				return err
			}
			p, off = p[n:], off+int64(n)
		}
		return nil
	}
	// Copy a chunk into shared memory, hand it to the agent, copy the
	// next while the agent moves it.
	var calls []*call
	var err error
	for done := 0; done < len(p) && err == nil; {
		n := min(len(p)-done, syncChunk)
		o := off + int64(done)
		copy(b.mem[o:], p[done:done+n])
		var cl *call
		if cl, err = b.d.start(session.OpSync, session.SyncRequest{Handle: b.handle, Off: uint64(o), Len: uint64(n), Dir: session.ToDevice}.Marshal()); err == nil {
			calls = append(calls, cl)
		}
		done += n
	}
	for _, cl := range calls {
		if _, werr := b.d.wait(ctx, cl); werr != nil && err == nil {
			err = werr
		}
	}
	return err
}

// Read copies device memory at offset off of the buffer into p.
func (b *Buffer) Read(ctx context.Context, p []byte, off int64) error {
	err := b.read(ctx, p, off)
	if r := b.d.recorder(); r != nil && err == nil {
		r.RecordRead(b.addr, off, p)
	}
	return err
}

func (b *Buffer) read(ctx context.Context, p []byte, off int64) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.check(off, int64(len(p))); err != nil {
		return err
	}
	if b.mem == nil {
		for len(p) > 0 {
			n := min(len(p), session.MaxData)
			r, err := b.d.do(ctx, session.OpRead, session.U64s(b.handle, uint64(off), uint64(n)))
			if err != nil {
				return err
			}
			if len(r.payload) != n {
				return fmt.Errorf("faas: read of %d bytes answered with %d", n, len(r.payload))
			}
			copy(p, r.payload)
			p, off = p[n:], off+int64(n)
		}
		return nil
	}
	// Keep the agent one chunk ahead of the copy out.
	type chunk struct {
		cl   *call
		o, n int
	}
	var q []chunk
	next := 0
	issue := func() error {
		if next >= len(p) {
			return nil
		}
		n := min(len(p)-next, syncChunk)
		cl, err := b.d.start(session.OpSync, session.SyncRequest{Handle: b.handle, Off: uint64(off) + uint64(next), Len: uint64(n), Dir: session.FromDevice}.Marshal())
		if err != nil {
			return err
		}
		q = append(q, chunk{cl, next, n})
		next += n
		return nil
	}
	var err error
	for range readAhead {
		if err = issue(); err != nil {
			break
		}
	}
	for len(q) > 0 {
		c := q[0]
		q = q[1:]
		if err != nil {
			b.d.wait(ctx, c.cl)
			continue
		}
		if _, err = b.d.wait(ctx, c.cl); err != nil {
			continue
		}
		err = issue()
		copy(p[c.o:c.o+c.n], b.mem[off+int64(c.o):])
	}
	return err
}

// Sync moves n bytes at offset off between Bytes and device memory. It
// needs the local path: over https it fails (Bytes is nil there; use
// Write and Read).
func (b *Buffer) Sync(ctx context.Context, dir SyncDir, off, n int64) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if err := b.check(off, n); err != nil {
		return err
	}
	if dir != ToDevice && dir != FromDevice {
		return &Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf("sync direction %d", dir)}
	}
	if b.mem == nil {
		return fmt.Errorf("faas: Sync needs shared memory, which sessions over the network do not have: %w", errors.ErrUnsupported)
	}
	_, err := b.d.do(ctx, session.OpSync, session.SyncRequest{Handle: b.handle, Off: uint64(off), Len: uint64(n), Dir: uint64(dir)}.Marshal())
	if r := b.d.recorder(); r != nil && err == nil {
		// What moved, in either direction: bytes written for a replay to
		// write, or read back for it to compare.
		if dir == ToDevice {
			r.RecordWrite(b.addr, off, b.mem[off:off+n])
		} else {
			r.RecordRead(b.addr, off, b.mem[off:off+n])
		}
	}
	return err
}

// Free releases the buffer's device memory (faasd zeroes it) and its host
// memory. A buffer a live program reads or writes cannot be freed
// (ErrInUse).
func (b *Buffer) Free(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return &Error{Code: agentapi.CodeBadHandle, Message: "buffer freed twice"}
	}
	if _, err := b.d.do(ctx, session.OpFree, session.U64s(b.handle)); err != nil {
		return err
	}
	b.freed = true
	if r := b.d.recorder(); r != nil {
		r.RecordFree(b.addr)
	}
	b.d.mu.Lock()
	delete(b.d.bufs, b)
	b.d.mu.Unlock()
	if b.mem != nil {
		session.Unmap(b.mem)
		b.mem = nil
	}
	return nil
}

// unmap releases the host memory (Device.Close).
func (b *Buffer) unmap() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.freed = true
	if b.mem != nil {
		session.Unmap(b.mem)
		b.mem = nil
	}
}
