package faas

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// closeTimeout bounds Device.Close's goodbye to the agent.
const closeTimeout = 5 * time.Second

// maxAbandoned bounds the allocations remembered to be freed when their
// late replies come.
const maxAbandoned = 1024

// Device is a session on one slot's AliDNN engine: the tenant's buffers,
// checked programs and job queue, from Client.Open to Close.
//
// # Paths
//
// On a unix socket the session runs on shared memory with faasd (package
// sdk/agentapi/session): every buffer has host memory mapped by both
// processes (Buffer.Bytes), Write and Read copy into and out of it while
// faasd moves it to and from the device, and jobs go through a submission
// ring and come back through a completion ring, without a system call per
// job while either side is busy. Over https the same calls send the bytes
// and jobs in frames on the TLS connection (at most 16 MiB a frame; larger
// transfers are split), and Bytes is nil.
//
// # Isolation and cleanup
//
// faasd gives every session its own window of device memory. Buffers and
// programs are named by unguessable handles valid only in their session;
// every instruction of a program is checked to stay inside the session's
// buffers before it may run (ErrRefused otherwise). When the session ends —
// Close, the process exiting or crashing, the slot being cleared or
// reloaded — faasd cancels its jobs, zeroes and frees its memory and
// closes its window.
//
// # Jobs
//
// Jobs run in the order submitted; the engine is shared with other
// sessions at job boundaries. At most 256 jobs (the ring size) are in
// flight; Submit waits for room. Job.Wait polls for about 200 µs before it
// sleeps, which keeps short jobs' round trip to a few microseconds.
//
// # Errors
//
// Refusals are *Error with a session code: ErrBadHandle, ErrQuota,
// ErrOutOfRange, ErrRefused, ErrInUse, ErrClosed (errors.Is). A job the
// engine stopped returns *alidnn.EngineError from Wait. When the
// connection to faasd breaks, pending and later calls return an error
// matching both ErrClosed and ErrUnavailable.
//
// A Device is safe for concurrent use.
type Device struct {
	c      *Client
	slot   int
	tenant string
	conn   net.Conn
	fdc    *session.FDConn // local path only
	br     *bufio.Reader
	queue  *Queue

	wmu  sync.Mutex // frame writes, and wbuf
	wbuf []byte     // session.WriteFrame's scratch

	mu      sync.Mutex
	pending map[uint64]*call
	// abandoned are requests whose caller gave up (ctx): an allocation
	// that succeeds after all is freed again when its reply comes.
	abandoned map[uint64]session.Op
	nextID    uint64
	jobs      map[uint64]*Job
	prof      profiles
	rec       atomic.Pointer[Recorder]
	trace     io.Closer // the $FAAS_TRACE recording, closed by Close
	bufs      map[*Buffer]struct{}
	closed    bool
	cause     error         // why the session ended; nil after Close
	done      chan struct{} // closed when the reader has stopped

	// Local path: the control block. ctl is used under sqMu (submissions)
	// or cqMu (completions) and set to nil under both when unmapped.
	shm     bool // the session runs on shared memory
	ctl     *session.Control
	ctlMem  []byte
	sqMu    sync.Mutex
	cqMu    sync.Mutex
	waiters atomic.Int32 // Job.Wait calls blocked on a doorbell

	inflight chan struct{} // a token per job submitted and not yet completed
	nextJob  atomic.Uint64
	closeMu  sync.Mutex
}

type call struct {
	id uint64
	op session.Op
	ch chan reply // capacity 1: the reader never blocks
}

type reply struct {
	payload []byte
	fd      int // -1: none
	err     error
}

// Open starts a session on slot, which must have the AliDNN engine loaded
// and be the caller's (loaded by it, shared with it by the operator's
// configuration, or any slot for the operator). ctx bounds the handshake
// only; the session lasts until Close.
func (c *Client) Open(ctx context.Context, slot int) (*Device, error) {
	conn, local, err := c.dialSession(ctx)
	if err != nil {
		return nil, err
	}
	d, err := c.handshake(ctx, conn, local, slot)
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	go d.readLoop()
	if path := os.Getenv(TraceEnv); path != "" {
		if err := c.traceTo(ctx, d, path); err != nil {
			d.Close()
			return nil, err
		}
	}
	return d, nil
}

// dialSession opens a connection of its own for the session: the upgraded
// connection leaves HTTP for good, and on a unix socket the session needs
// the *net.UnixConn to receive descriptors.
func (c *Client) dialSession(ctx context.Context) (net.Conn, bool, error) {
	if c.base == "http://faasd" {
		var dl net.Dialer
		conn, err := dl.DialContext(ctx, "unix", c.target)
		if err != nil {
			return nil, false, &transportError{msg: "faasd is not running at " + c.target, err: err}
		}
		return conn, true, nil
	}
	u, err := url.Parse(c.base)
	if err != nil {
		return nil, false, err
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), map[string]string{"https": "443", "http": "80"}[u.Scheme])
	}
	var conn net.Conn
	if u.Scheme == "https" {
		var cfg *tls.Config
		if t, ok := c.hc.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		} else {
			cfg = &tls.Config{}
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		dl := tls.Dialer{Config: cfg}
		conn, err = dl.DialContext(ctx, "tcp", host)
	} else {
		var dl net.Dialer
		conn, err = dl.DialContext(ctx, "tcp", host)
	}
	if err != nil {
		return nil, false, &transportError{msg: "faasd at " + c.target, err: err}
	}
	return conn, false, nil
}

func (c *Client) handshake(ctx context.Context, conn net.Conn, local bool, slot int) (*Device, error) {
	// The handshake obeys ctx; the session afterwards does not.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	d := &Device{c: c, slot: slot, conn: conn, pending: map[uint64]*call{}, abandoned: map[uint64]session.Op{}, jobs: map[uint64]*Job{},
		bufs: map[*Buffer]struct{}{}, done: make(chan struct{})}
	var rd io.Reader = conn
	if local {
		uc, ok := conn.(*net.UnixConn)
		if !ok {
			return nil, errors.New("faas: unix socket connection of an unexpected type")
		}
		d.fdc = session.NewFDConn(uc)
		rd = d.fdc
	}
	d.br = bufio.NewReaderSize(rd, 64<<10)

	path := "/v1/slots/" + strconv.Itoa(slot) + "/session"
	req, err := http.NewRequest(http.MethodPost, c.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", session.Protocol)
	req.Header.Set("User-Agent", c.ua)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if err := req.Write(conn); err != nil {
		return nil, &transportError{msg: "POST " + path + ": faasd at " + c.target, err: err}
	}
	resp, err := http.ReadResponse(d.br, req)
	if err != nil {
		return nil, &transportError{msg: "POST " + path + ": faasd at " + c.target, err: err}
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), session.Protocol) {
		return nil, fmt.Errorf("faas: faasd switched to %q, want %s", resp.Header.Get("Upgrade"), session.Protocol)
	}

	h := session.Hello{Version: session.Version}
	if local {
		h.Flags |= session.HelloShm
	}
	if err := d.writeFrame(session.OpHello, 0, h.Marshal()); err != nil {
		return nil, &transportError{msg: "session hello", err: err}
	}
	f, err := session.ReadFrame(d.br, session.MaxPayload)
	if err != nil {
		return nil, &transportError{msg: "session setup", err: err}
	}
	if f.Op == session.OpError {
		return nil, wireError(f.Payload)
	}
	if f.Op != session.OpReply {
		return nil, fmt.Errorf("faas: session setup: unexpected %v frame", f.Op)
	}
	setup, err := session.ParseSetup(f.Payload)
	if err != nil {
		return nil, fmt.Errorf("faas: %w", err)
	}
	d.tenant = setup.Tenant
	// An agent may decline shared memory on the socket (the session then
	// runs on frames, as over TCP), but cannot offer it over TCP.
	if (setup.Shm && !local) || (f.Flags&session.FlagFD != 0) != setup.Shm {
		return nil, errors.New("faas: session setup: shared memory offered on the wrong path")
	}
	if setup.Shm {
		fd, err := d.fdc.TakeFD()
		if err != nil {
			return nil, fmt.Errorf("faas: %w", err)
		}
		mem, err := session.MapFD(fd, setup.ControlSize)
		if err != nil {
			return nil, fmt.Errorf("faas: %w", err)
		}
		ctl, err := session.NewControl(mem, setup.Entries)
		if err == nil {
			err = ctl.Check()
		}
		if err != nil {
			session.Unmap(mem)
			return nil, fmt.Errorf("faas: %w", err)
		}
		d.ctl, d.ctlMem, d.shm = ctl, mem, true
	}
	d.inflight = make(chan struct{}, setup.Entries)
	d.nextID = 1
	d.queue = &Queue{d: d}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		d.unmapAll()
		return nil, err
	}
	return d, nil
}

// Slot is the device's slot.
func (d *Device) Slot() int { return d.slot }

// Tenant is the tenant the agent runs the session for.
func (d *Device) Tenant() string { return d.tenant }

// Local reports whether the session runs on shared memory (a unix socket).
func (d *Device) Local() bool { return d.shm }

// Queue returns the device's job queue.
func (d *Device) Queue() *Queue { return d.queue }

// Done is closed when the session has ended: closed by Close, cut by
// faasd (stopped, restarted, the attachment lost) or by the connection.
// A long-lived server watches it to learn that an idle engine is gone.
func (d *Device) Done() <-chan struct{} { return d.done }

// Close ends the session: jobs still queued or running end with ErrClosed,
// and faasd zeroes and frees the session's device memory. Buffers' Bytes
// must not be touched afterwards.
func (d *Device) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	d.mu.Lock()
	already := d.closed
	d.mu.Unlock()
	if !already {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if cl, err := d.start(session.OpClose); err == nil {
			d.wait(ctx, cl)
		}
		cancel()
		d.shutdown(nil)
	}
	d.conn.Close()
	<-d.done
	d.unmapAll()
	if t := d.trace; t != nil {
		d.trace = nil
		d.Record(nil)
		return t.Close()
	}
	return nil
}

// unmapAll releases the shared mappings once nothing can use them.
func (d *Device) unmapAll() {
	d.sqMu.Lock()
	d.cqMu.Lock()
	if d.ctlMem != nil {
		session.Unmap(d.ctlMem)
		d.ctl, d.ctlMem = nil, nil
	}
	d.cqMu.Unlock()
	d.sqMu.Unlock()
	d.mu.Lock()
	bufs := d.bufs
	d.bufs = map[*Buffer]struct{}{}
	d.mu.Unlock()
	for b := range bufs {
		b.unmap()
	}
}

// writeFrame sends one frame; the payload parts are concatenated.
func (d *Device) writeFrame(op session.Op, id uint64, parts ...[]byte) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	return session.WriteFrame(d.conn, &d.wbuf, op, id, parts...)
}

// start sends a request and registers for its reply.
func (d *Device) start(op session.Op, parts ...[]byte) (*call, error) {
	d.mu.Lock()
	if d.closed {
		err := d.endedErr()
		d.mu.Unlock()
		return nil, err
	}
	cl := &call{id: d.nextID, op: op, ch: make(chan reply, 1)}
	d.nextID++
	d.pending[cl.id] = cl
	d.mu.Unlock()
	if err := d.writeFrame(op, cl.id, parts...); err != nil {
		d.forget(cl)
		d.conn.Close() // the reader ends the session
		return nil, &sessionEnded{err: err}
	}
	return cl, nil
}

// wait waits for the reply of cl. If ctx ends first the request is
// abandoned; the agent still carries it out.
func (d *Device) wait(ctx context.Context, cl *call) (reply, error) {
	select {
	case r := <-cl.ch:
		return r, r.err
	case <-ctx.Done():
		d.forget(cl)
		return reply{fd: -1}, ctx.Err()
	}
}

// forget abandons a call; a descriptor its reply brought is closed.
func (d *Device) forget(cl *call) {
	d.mu.Lock()
	_, waiting := d.pending[cl.id]
	delete(d.pending, cl.id)
	if waiting && cl.op == session.OpAlloc && len(d.abandoned) < maxAbandoned {
		d.abandoned[cl.id] = cl.op
	}
	d.mu.Unlock()
	if !waiting {
		// The reader has taken the call and sends (without blocking).
		if r := <-cl.ch; r.fd >= 0 {
			unix.Close(r.fd)
		}
	}
}

// do is start and wait.
func (d *Device) do(ctx context.Context, op session.Op, parts ...[]byte) (reply, error) {
	if err := ctx.Err(); err != nil {
		return reply{fd: -1}, err
	}
	cl, err := d.start(op, parts...)
	if err != nil {
		return reply{fd: -1}, err
	}
	return d.wait(ctx, cl)
}

func (d *Device) readLoop() {
	err := d.read()
	d.shutdown(err)
	close(d.done)
}

func (d *Device) read() error {
	for {
		f, err := session.ReadFrame(d.br, session.MaxPayload)
		if err != nil {
			return err
		}
		fd := -1
		if f.Flags&session.FlagFD != 0 {
			if d.fdc == nil {
				return fmt.Errorf("%w: a descriptor announced on TCP", session.ErrFrame)
			}
			if fd, err = d.fdc.TakeFD(); err != nil {
				return err
			}
		}
		switch f.Op {
		case session.OpReply, session.OpError:
			d.mu.Lock()
			cl := d.pending[f.ID]
			delete(d.pending, f.ID)
			op, gaveUp := d.abandoned[f.ID]
			delete(d.abandoned, f.ID)
			d.mu.Unlock()
			if cl == nil {
				if fd >= 0 {
					unix.Close(fd)
				}
				if gaveUp && op == session.OpAlloc && f.Op == session.OpReply {
					if ar, err := session.ParseAllocReply(f.Payload); err == nil {
						// Nobody waits for this reply: the request id is
						// not pending, so the answer is dropped.
						go d.writeFrame(session.OpFree, 0, session.U64s(ar.Handle))
					}
				}
				continue
			}
			r := reply{payload: f.Payload, fd: fd}
			if f.Op == session.OpError {
				r.err = wireError(f.Payload)
			}
			cl.ch <- r
		case session.OpCompletion:
			cp, err := session.ParseCompletion(f.Payload)
			if err != nil {
				return err
			}
			d.complete(cp)
		case session.OpDoorbell:
			if d.ctl == nil {
				continue
			}
			d.drain()
			if d.waiters.Load() > 0 {
				// Somebody still waits: ask for the next doorbell too, then
				// look again for what arrived before the flag was up.
				d.withCQ(func(c *session.Control) { c.SleepCompletions() })
				d.drain()
			}
		default:
			return fmt.Errorf("%w: unexpected %v frame from the agent", session.ErrFrame, f.Op)
		}
	}
}

// shutdown ends the session on this side: pending requests and jobs fail.
func (d *Device) shutdown(cause error) {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	if cause != nil {
		d.cause = cause
	}
	pending, jobs := d.pending, d.jobs
	d.pending, d.jobs = map[uint64]*call{}, map[uint64]*Job{}
	err := d.endedErr()
	d.mu.Unlock()
	for _, cl := range pending {
		cl.ch <- reply{fd: -1, err: err}
	}
	for _, j := range jobs {
		j.finish(session.Completion{}, err)
	}
	d.conn.Close()
	if d.fdc != nil {
		d.fdc.CloseFDs()
	}
}

// endWith ends the session because of cause, which pending and later
// calls return (matching ErrClosed too). A session the connection cut
// already takes cause as its reason as well: the node ends a lost
// attachment's sessions itself, often before the registry says why. A
// session closed by Close stays closed.
func (d *Device) endWith(cause error) {
	d.shutdown(cause)
	d.mu.Lock()
	if d.cause != nil {
		d.cause = cause
	}
	d.mu.Unlock()
}

// endedErr is the error of calls after the session ended; d.mu held.
func (d *Device) endedErr() error {
	if d.cause == nil {
		return &Error{Code: agentapi.CodeSessionClosed, Message: fmt.Sprintf("session on slot %d closed", d.slot)}
	}
	return &sessionEnded{err: d.cause}
}

// sessionEnded is a session cut by the connection: the agent went away or
// ended it.
type sessionEnded struct{ err error }

func (e *sessionEnded) Error() string {
	if errors.Is(e.err, io.EOF) || errors.Is(e.err, net.ErrClosed) {
		return "faas: session ended by faasd"
	}
	return "faas: session ended: " + e.err.Error()
}

func (e *sessionEnded) Unwrap() []error { return []error{ErrClosed, ErrUnavailable, e.err} }

// wireError decodes an OpError payload into *Error.
func wireError(p []byte) error {
	ep, err := session.ParseError(p)
	if err != nil {
		return fmt.Errorf("faas: %w", err)
	}
	if ep.Code == "" {
		ep.Code = agentapi.CodeInternal
	}
	return &Error{Code: ep.Code, Message: ep.Message}
}

// withCQ runs f on the control block under the completion lock.
func (d *Device) withCQ(f func(*session.Control)) {
	d.cqMu.Lock()
	if d.ctl != nil {
		f(d.ctl)
	}
	d.cqMu.Unlock()
}

// drain takes every completion off the ring (blocking for the lock).
func (d *Device) drain() {
	d.cqMu.Lock()
	d.drainLocked()
}

// tryDrain is drain unless someone else is at it.
func (d *Device) tryDrain() {
	if d.cqMu.TryLock() {
		d.drainLocked()
	}
}

// drainLocked pops completions and dispatches them; it unlocks cqMu
// before waking any job, so that woken waiters find the lock free.
func (d *Device) drainLocked() {
	var buf [16]session.Completion
	for {
		n := 0
		var bad error
		for d.ctl != nil && n < len(buf) {
			cp, ok, err := d.ctl.PopCompletion()
			if err != nil {
				bad = err
				break
			}
			if !ok {
				break
			}
			buf[n] = cp
			n++
		}
		if n == 0 || bad != nil {
			d.cqMu.Unlock()
			for _, cp := range buf[:n] {
				d.complete(cp)
			}
			if bad != nil {
				d.conn.Close()
			}
			return
		}
		for _, cp := range buf[:n] {
			d.complete(cp)
		}
	}
}

// complete delivers a completion to its job.
func (d *Device) complete(cp session.Completion) {
	d.mu.Lock()
	j := d.jobs[cp.Job]
	delete(d.jobs, cp.Job)
	d.mu.Unlock()
	if j != nil {
		j.finish(cp, nil)
	}
}
