package session

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Ring sizes.
const (
	// DefaultEntries is the ring size the agent offers.
	DefaultEntries = 256
	// MaxEntries bounds a ring.
	MaxEntries = 1 << 16
)

// The control block: a page of indices, each on its own cache line so that
// the two processes do not contend for lines they do not share, then the
// submission ring (Entries × SubmitSize) and the completion ring (Entries ×
// CompletionSize).
const (
	offMagic   = 0
	offSQHead  = 64  // agent writes: entries consumed
	offSQTail  = 128 // client writes: entries published
	offSQSleep = 192 // 1: the agent sleeps on the socket
	offCQHead  = 256 // client writes
	offCQTail  = 320 // agent writes
	offCQSleep = 384 // 1: the client waits for a doorbell
	offRings   = 4096

	magic = 0x314d485353414146 // "FAASSHM1"
)

// ControlSize is the size of a control block with n entries per ring.
func ControlSize(n uint32) int {
	return roundPage(offRings + int(n)*(SubmitSize+CompletionSize))
}

func roundPage(n int) int {
	p := os.Getpagesize()
	return (n + p - 1) / p * p
}

// RoundPage rounds n up to the page size.
func RoundPage(n uint64) uint64 { return uint64(roundPage(int(n))) }

// ErrCorrupt is a ring whose peer-written index is impossible.
var ErrCorrupt = errors.New("session: ring indices corrupt")

// Control is a mapped control block. The methods of each ring end are for
// one goroutine at a time: the SQ producer and CQ consumer are the
// client's, the SQ consumer and CQ producer the agent's.
type Control struct {
	mem     []byte
	entries uint64
	mask    uint64
	sq, cq  []byte

	// Private copies of the indices this end owns; the shared ones are
	// only published, never trusted back.
	sqTail, sqHead uint64
	cqTail, cqHead uint64
}

// NewControl lays a control block over mem (ControlSize(entries) bytes,
// page aligned, zero or initialised by Init).
func NewControl(mem []byte, entries uint32) (*Control, error) {
	if entries == 0 || entries > MaxEntries || entries&(entries-1) != 0 || len(mem) < ControlSize(entries) {
		return nil, fmt.Errorf("session: control block of %d bytes for %d entries", len(mem), entries)
	}
	if uintptr(unsafe.Pointer(&mem[0]))%64 != 0 {
		return nil, errors.New("session: control block not aligned")
	}
	n := uint64(entries)
	c := &Control{mem: mem, entries: n, mask: n - 1}
	c.sq = mem[offRings : offRings+n*SubmitSize]
	c.cq = mem[offRings+n*SubmitSize : offRings+n*(SubmitSize+CompletionSize)]
	return c, nil
}

// Init writes the magic (agent side, on a fresh block).
func (c *Control) Init() { c.word(offMagic).Store(magic) }

// Check verifies the magic (client side).
func (c *Control) Check() error {
	if c.word(offMagic).Load() != magic {
		return fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	return nil
}

// Entries is the ring size.
func (c *Control) Entries() int { return int(c.entries) }

func (c *Control) word(off int) *atomic.Uint64 {
	return (*atomic.Uint64)(unsafe.Pointer(&c.mem[off]))
}

// PushSubmit publishes e (client). It reports false when the ring is full,
// and wake when the agent sleeps and needs a doorbell.
func (c *Control) PushSubmit(e SubmitEntry) (ok, wake bool) {
	head := c.word(offSQHead).Load()
	if c.sqTail-head >= c.entries {
		return false, false
	}
	b := c.sq[(c.sqTail&c.mask)*SubmitSize:]
	le.PutUint64(b, e.Prog)
	le.PutUint64(b[8:], e.Job)
	c.sqTail++
	c.word(offSQTail).Store(c.sqTail)
	return true, c.word(offSQSleep).CompareAndSwap(1, 0)
}

// PopSubmit takes the next entry (agent).
func (c *Control) PopSubmit() (SubmitEntry, bool, error) {
	tail := c.word(offSQTail).Load()
	if tail == c.sqHead {
		return SubmitEntry{}, false, nil
	}
	if tail-c.sqHead > c.entries {
		return SubmitEntry{}, false, fmt.Errorf("%w: submission tail %d, head %d", ErrCorrupt, tail, c.sqHead)
	}
	b := c.sq[(c.sqHead&c.mask)*SubmitSize:]
	e := SubmitEntry{Prog: le.Uint64(b), Job: le.Uint64(b[8:])}
	c.sqHead++
	c.word(offSQHead).Store(c.sqHead)
	return e, true, nil
}

// SubmitPending reports whether the submission ring holds entries (agent).
func (c *Control) SubmitPending() bool { return c.word(offSQTail).Load() != c.sqHead }

// SleepSubmit arms the agent's sleep flag; the agent must look at the ring
// once more before it blocks.
func (c *Control) SleepSubmit() { c.word(offSQSleep).Store(1) }

// WakeSubmit clears the flag after waking; it reports whether the client
// had not yet cleared it (then no doorbell is on its way).
func (c *Control) WakeSubmit() bool { return c.word(offSQSleep).CompareAndSwap(1, 0) }

// PushCompletion publishes cp (agent). It reports false when the ring is
// full, and wake when the client waits for a doorbell.
func (c *Control) PushCompletion(cp *Completion) (ok, wake bool, err error) {
	head := c.word(offCQHead).Load()
	used := c.cqTail - head
	if used > c.entries {
		return false, false, fmt.Errorf("%w: completion head %d, tail %d", ErrCorrupt, head, c.cqTail)
	}
	if used == c.entries {
		return false, false, nil
	}
	cp.Put(c.cq[(c.cqTail&c.mask)*CompletionSize:])
	c.cqTail++
	c.word(offCQTail).Store(c.cqTail)
	return true, c.word(offCQSleep).CompareAndSwap(1, 0), nil
}

// PopCompletion takes the next completion (client).
func (c *Control) PopCompletion() (Completion, bool, error) {
	tail := c.word(offCQTail).Load()
	if tail == c.cqHead {
		return Completion{}, false, nil
	}
	if tail-c.cqHead > c.entries {
		return Completion{}, false, fmt.Errorf("%w: completion tail %d, head %d", ErrCorrupt, tail, c.cqHead)
	}
	off := (c.cqHead & c.mask) * CompletionSize
	cp, err := ParseCompletion(c.cq[off : off+CompletionSize])
	c.cqHead++
	c.word(offCQHead).Store(c.cqHead)
	return cp, true, err
}

// SleepCompletions arms the client's flag: the next completion the agent
// publishes comes with a doorbell. Look at the ring once more afterwards.
func (c *Control) SleepCompletions() { c.word(offCQSleep).Store(1) }

// Memfd creates a sealed, zeroed memfd of size bytes and maps it shared.
// The caller closes fd (after passing it on) and unmaps mem with Unmap.
func Memfd(name string, size int) (fd int, mem []byte, err error) {
	if size <= 0 || uint64(size) > MaxBuffer {
		return -1, nil, fmt.Errorf("session: memfd of %d bytes", size)
	}
	fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("session: memfd_create: %w", err)
	}
	fail := func(what string, e error) (int, []byte, error) {
		unix.Close(fd)
		return -1, nil, fmt.Errorf("session: memfd %s: %w", what, e)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("truncate", err)
	}
	// Sealed against resizing: a peer that shrank the file would make our
	// accesses to the mapping fault (SIGBUS).
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal", err)
	}
	mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fail("mmap", err)
	}
	return fd, mem, nil
}

// MapFD maps a memfd received from the agent, checking that it has size
// bytes and is sealed against shrinking. It closes fd.
func MapFD(fd int, size uint64) ([]byte, error) {
	defer unix.Close(fd)
	if size == 0 || size > MaxBuffer {
		return nil, fmt.Errorf("session: mapping of %d bytes", size)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("session: fstat: %w", err)
	}
	if uint64(st.Size) != size {
		return nil, fmt.Errorf("session: shared memory of %d bytes, want %d", st.Size, size)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errors.New("session: shared memory not sealed against shrinking")
	}
	mem, err := unix.Mmap(fd, 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("session: mmap: %w", err)
	}
	return mem, nil
}

// Unmap releases a mapping of Memfd or MapFD; nil is a no-op.
func Unmap(mem []byte) error {
	if mem == nil {
		return nil
	}
	return unix.Munmap(mem)
}
