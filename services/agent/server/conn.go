package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// Timing of a connection's loop.
const (
	helloTimeout = 10 * time.Second
	// pollSpin is how long the agent keeps polling an empty submission
	// ring after its last job before it sleeps on the socket: a tenant
	// submitting back to back never pays a system call per job.
	pollSpin = 100 * time.Microsecond
	// cqBackoff is the pause while a client leaves its completion ring
	// full (a client that submits more than it reaps; the SDK does not).
	cqBackoff = time.Millisecond
	// workQueue bounds the requests read ahead of the one being carried
	// out, so a session holds at most a few frames of MaxPayload.
	workQueue = 2
	// maxStaged bounds a local session's buffers: each is a mapping in the
	// agent, and the kernel's limit on mappings is per process, shared by
	// every tenant (vm.max_map_count, 65530 by default).
	maxStaged = 4096
)

// connLoop carries one tenant session over one upgraded connection: the
// frames on conn, and on the local path the shared control block and
// staging memory. The session itself (sessions.Session) is the engine's;
// the loop closes it when the connection ends.
type connLoop struct {
	conn net.Conn
	uc   *net.UnixConn // the local path; nil over TLS
	br   *bufio.Reader
	sess *sessions.Session
	log  *slog.Logger

	ctx    context.Context // ends with the connection
	cancel context.CancelFunc

	wmu  sync.Mutex // frame writes, and wbuf
	wbuf []byte     // session.WriteFrame's scratch

	work     chan session.Frame
	staging  map[sessions.Handle][]byte // owned by the worker
	ctl      *session.Control
	ctlMem   []byte
	doorbell chan struct{}
	refused  chan sessions.Completion // submissions the session refused
	cancels  chan session.Frame       // OpCancel for the pump (local path)

	forwarded chan struct{} // closed when forward has returned
}

// serveConn runs a session on an upgraded connection until it ends: the
// client closes it, exits or crashes (the kernel closes the socket), breaks
// the protocol, or the engine stops. Then the session is closed: its jobs
// end, its memory is zeroed and freed, its window disabled.
func serveConn(conn net.Conn, br *bufio.Reader, sess *sessions.Session, log *slog.Logger) {
	c := &connLoop{conn: conn, br: br, sess: sess, log: log, work: make(chan session.Frame, workQueue),
		staging: map[sessions.Handle][]byte{}, doorbell: make(chan struct{}, 1),
		refused: make(chan sessions.Completion, 2*session.DefaultEntries), cancels: make(chan session.Frame, workQueue)}
	c.uc, _ = conn.(*net.UnixConn)
	c.ctx, c.cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		c.cancel()
		conn.Close()
		close(c.work)
		wg.Wait() // worker and pump
		sess.Close()
		if c.ctl != nil {
			for range sess.Completions() { // let the engine's outbox finish
			}
		}
		<-c.forwarded
		for _, m := range c.staging {
			session.Unmap(m)
		}
		session.Unmap(c.ctlMem)
		log.Debug("session closed")
	}()
	c.forwarded = make(chan struct{})
	if err := c.setup(); err != nil {
		log.Debug("session setup failed", "err", err)
		close(c.forwarded)
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		c.worker()
	}()
	if c.ctl != nil {
		close(c.forwarded)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.pump()
		}()
	} else {
		go func() {
			defer close(c.forwarded)
			c.forward()
		}()
	}
	if err := c.read(); err != nil && c.ctx.Err() == nil {
		log.Debug("session connection ended", "err", err)
	}
}

// setup answers the client's hello.
func (c *connLoop) setup() error {
	c.conn.SetReadDeadline(time.Now().Add(helloTimeout))
	f, err := session.ReadFrame(c.br, 64)
	if err != nil {
		return err
	}
	c.conn.SetReadDeadline(time.Time{})
	if f.Op != session.OpHello {
		return fmt.Errorf("%w: %v before hello", session.ErrFrame, f.Op)
	}
	h, err := session.ParseHello(f.Payload)
	if err != nil {
		return err
	}
	if h.Version != session.Version {
		c.writeErrorFrame(f.ID, agentapi.CodeBadRequest, fmt.Sprintf("session protocol version %d, this agent speaks %d", h.Version, session.Version))
		return errors.New("version mismatch")
	}
	st := session.Setup{Entries: session.DefaultEntries, Tenant: c.sess.Tenant()}
	if h.Flags&session.HelloShm == 0 || c.uc == nil {
		return c.writeFrame(session.OpReply, f.ID, st.Marshal())
	}
	size := session.ControlSize(st.Entries)
	fd, mem, err := session.Memfd("faas-session", size)
	if err != nil {
		c.writeErrorFrame(f.ID, agentapi.CodeInternal, err.Error())
		return err
	}
	defer closeFD(fd)
	if c.ctl, err = session.NewControl(mem, st.Entries); err != nil {
		session.Unmap(mem)
		return err
	}
	c.ctlMem = mem
	c.ctl.Init()
	st.Shm, st.ControlSize = true, uint64(size)
	return c.writeFD(session.OpReply, f.ID, st.Marshal(), fd)
}

// read takes frames off the connection until it ends.
func (c *connLoop) read() error {
	for {
		f, err := session.ReadFrame(c.br, session.MaxPayload)
		if err != nil {
			return err
		}
		if f.Flags != 0 {
			return fmt.Errorf("%w: flags %#x from a client", session.ErrFrame, f.Flags)
		}
		switch f.Op {
		case session.OpDoorbell:
			select {
			case c.doorbell <- struct{}{}:
			default:
			}
		case session.OpSubmit:
			e, err := session.ParseSubmit(f.Payload)
			if err != nil {
				return err
			}
			c.submit(e)
		case session.OpCancel:
			if c.ctl == nil {
				// Over TLS every submission before this frame has
				// reached the session already.
				c.cancelJob(f)
				continue
			}
			// The job may still be on the submission ring: the pump
			// takes the ring's entries before it cancels.
			select {
			case c.cancels <- f:
			case <-c.ctx.Done():
				return nil
			}
		case session.OpAlloc, session.OpFree, session.OpWrite, session.OpRead, session.OpSync, session.OpProgram, session.OpClose:
			select {
			case c.work <- f:
			case <-c.ctx.Done():
				return nil
			}
		default:
			return fmt.Errorf("%w: %v from a client", session.ErrFrame, f.Op)
		}
	}
}

// worker carries out requests in the order they came.
func (c *connLoop) worker() {
	for f := range c.work {
		if c.ctx.Err() != nil {
			continue
		}
		payload, fd, err := c.handle(f)
		switch {
		case err != nil:
			code := sessionCode(err)
			if code == agentapi.CodeInternal {
				c.log.Warn("session request failed", "op", f.Op.String(), "err", err)
			}
			c.writeErrorFrame(f.ID, code, err.Error())
		case fd >= 0:
			c.writeFD(session.OpReply, f.ID, payload, fd)
			closeFD(fd)
		default:
			c.writeFrame(session.OpReply, f.ID, payload)
		}
		if f.Op == session.OpClose {
			c.kill()
		}
	}
}

// handle carries out one request; fd >= 0 goes with the reply.
func (c *connLoop) handle(f session.Frame) (payload []byte, fd int, err error) {
	ctx := c.ctx
	switch f.Op {
	case session.OpAlloc:
		v, _, err := session.ParseU64s(f.Payload, 1, false)
		if err != nil {
			return nil, -1, err
		}
		if v[0] == 0 || v[0] > session.MaxBuffer {
			return nil, -1, fmt.Errorf("%w: buffer of %d bytes", session.ErrFrame, v[0])
		}
		if c.ctl != nil && len(c.staging) >= maxStaged {
			return nil, -1, fmt.Errorf("%d buffers in one session: %w", maxStaged, sessions.ErrQuota)
		}
		b, err := c.sess.Alloc(v[0])
		if err != nil {
			return nil, -1, err
		}
		rep := session.AllocReply{Handle: uint64(b.Handle), Addr: b.Addr, Size: b.Size}
		if c.ctl == nil {
			return rep.Marshal(), -1, nil
		}
		rep.Staging = session.RoundPage(b.Size)
		fd, mem, err := session.Memfd("faas-buffer", int(rep.Staging))
		if err != nil {
			c.sess.Free(b.Handle)
			return nil, -1, err
		}
		c.staging[b.Handle] = mem
		return rep.Marshal(), fd, nil
	case session.OpFree:
		v, _, err := session.ParseU64s(f.Payload, 1, false)
		if err != nil {
			return nil, -1, err
		}
		h := sessions.Handle(v[0])
		if err := c.sess.Free(h); err != nil {
			return nil, -1, err
		}
		if m, ok := c.staging[h]; ok {
			session.Unmap(m)
			delete(c.staging, h)
		}
		return nil, -1, nil
	case session.OpWrite:
		v, data, err := session.ParseU64s(f.Payload, 2, true)
		if err != nil {
			return nil, -1, err
		}
		return nil, -1, c.sess.Write(ctx, sessions.Handle(v[0]), v[1], data)
	case session.OpRead:
		v, _, err := session.ParseU64s(f.Payload, 3, false)
		if err != nil {
			return nil, -1, err
		}
		if v[2] > session.MaxData {
			return nil, -1, fmt.Errorf("%w: read of %d bytes, at most %d", session.ErrFrame, v[2], session.MaxData)
		}
		buf := make([]byte, v[2])
		if err := c.sess.Read(ctx, sessions.Handle(v[0]), v[1], buf); err != nil {
			return nil, -1, err
		}
		return buf, -1, nil
	case session.OpSync:
		r, err := session.ParseSyncRequest(f.Payload)
		if err != nil {
			return nil, -1, err
		}
		mem, ok := c.staging[sessions.Handle(r.Handle)]
		if !ok {
			return nil, -1, fmt.Errorf("sync: %w", sessions.ErrBadHandle)
		}
		if r.Off > uint64(len(mem)) || r.Len > uint64(len(mem))-r.Off {
			return nil, -1, fmt.Errorf("sync of %d bytes at %d: %w", r.Len, r.Off, sessions.ErrOutOfRange)
		}
		p := mem[r.Off : r.Off+r.Len]
		if r.Dir == session.ToDevice {
			return nil, -1, c.sess.Write(ctx, sessions.Handle(r.Handle), r.Off, p)
		}
		return nil, -1, c.sess.Read(ctx, sessions.Handle(r.Handle), r.Off, p)
	case session.OpProgram:
		insns, err := session.DecodeProgram(f.Payload)
		if err != nil {
			return nil, -1, err
		}
		h, err := c.sess.Program(ctx, insns)
		if err != nil {
			return nil, -1, err
		}
		return session.U64s(uint64(h)), -1, nil
	case session.OpClose:
		return nil, -1, nil
	}
	return nil, -1, fmt.Errorf("%w: %v", session.ErrFrame, f.Op)
}

// submit hands a job to the session; a refusal becomes its completion.
func (c *connLoop) submit(e session.SubmitEntry) {
	if err := c.sess.Submit(sessions.Handle(e.Prog), e.Job); err != nil {
		select {
		case c.refused <- sessions.Completion{Job: e.Job, Err: err}:
		case <-c.ctx.Done():
		}
	}
}

// pump runs the local path's rings in one goroutine: it takes jobs off
// the submission ring and puts completions on the completion ring. While
// jobs come and go it spins (yielding), so that neither a submission nor a
// completion waits for a goroutine to be woken; after pollSpin with
// nothing to do it sleeps until a doorbell or a completion.
func (c *connLoop) pump() {
	comps := c.sess.Completions()
	var pending []session.Completion // waiting for room on the ring
	last := time.Now()
	for c.ctx.Err() == nil {
		if len(pending) > 0 {
			if !c.flush(&pending) {
				return
			}
			if len(pending) > 0 { // the client leaves its ring full
				select {
				case <-time.After(cqBackoff):
				case <-c.ctx.Done():
				}
				continue
			}
		}
		busy := false
		select {
		case cp, ok := <-comps:
			if !ok {
				c.kill() // the engine stopped: end the connection too
				return
			}
			pending = append(pending, wireCompletion(cp))
			busy = true
		case cp := <-c.refused:
			pending = append(pending, wireCompletion(cp))
			busy = true
		case f := <-c.cancels:
			if _, ok := c.intake(&pending, -1); !ok {
				return
			}
			c.cancelJob(f)
			busy = true
		default:
		}
		took, ok := c.intake(&pending, 1)
		if !ok {
			return
		}
		if busy || took > 0 {
			last = time.Time{}
			continue
		}
		if last.IsZero() {
			last = time.Now()
		}
		if time.Since(last) < pollSpin {
			runtime.Gosched()
			continue
		}
		c.ctl.SleepSubmit()
		if c.ctl.SubmitPending() {
			c.ctl.WakeSubmit()
			continue
		}
		select {
		case <-c.doorbell:
		case cp, ok := <-comps:
			if !ok {
				c.kill()
				return
			}
			pending = append(pending, wireCompletion(cp))
		case cp := <-c.refused:
			pending = append(pending, wireCompletion(cp))
		case f := <-c.cancels:
			if _, ok := c.intake(&pending, -1); !ok {
				return
			}
			c.cancelJob(f)
		case <-c.ctx.Done():
			return
		}
		c.ctl.WakeSubmit()
		last = time.Now()
	}
}

// intake takes up to limit entries (all, if limit < 0) off the submission
// ring and hands them to the session; a refusal becomes a pending
// completion. It reports false when the client broke the ring (the
// connection is then ended).
func (c *connLoop) intake(pending *[]session.Completion, limit int) (took int, ok bool) {
	for limit < 0 || took < limit {
		e, ok, err := c.ctl.PopSubmit()
		if err != nil {
			c.log.Warn("session broke its submission ring", "err", err)
			c.kill()
			return took, false
		}
		if !ok {
			break
		}
		took++
		if err := c.sess.Submit(sessions.Handle(e.Prog), e.Job); err != nil {
			*pending = append(*pending, wireCompletion(sessions.Completion{Job: e.Job, Err: err}))
		}
	}
	return took, true
}

// cancelJob carries out an OpCancel and answers it.
func (c *connLoop) cancelJob(f session.Frame) {
	v, _, err := session.ParseU64s(f.Payload, 1, false)
	if err == nil {
		err = c.sess.Cancel(v[0])
	}
	if err != nil {
		c.writeErrorFrame(f.ID, sessionCode(err), err.Error())
		return
	}
	c.writeFrame(session.OpReply, f.ID, nil)
}

// flush puts pending completions on the ring as far as it has room, with
// one doorbell if the client waits for one. It reports false when the
// client broke the ring (the connection is then ended).
func (c *connLoop) flush(pending *[]session.Completion) bool {
	wake := false
	n := 0
	for n < len(*pending) {
		ok, w, err := c.ctl.PushCompletion(&(*pending)[n])
		if err != nil {
			c.log.Warn("session broke its completion ring", "err", err)
			c.kill()
			return false
		}
		if !ok {
			break
		}
		wake = wake || w
		n++
	}
	*pending = append((*pending)[:0], (*pending)[n:]...)
	if wake {
		c.writeFrame(session.OpDoorbell, 0, nil)
	}
	return true
}

// forward delivers the session's completions and refusals as frames (the
// remote path) until the session's channel closes; it never stops reading that channel early, so
// the engine's outbox always drains.
func (c *connLoop) forward() {
	comps := c.sess.Completions()
	for {
		var cp sessions.Completion
		select {
		case x, ok := <-comps:
			if !ok {
				c.kill() // the engine stopped: end the connection too
				return
			}
			cp = x
		case cp = <-c.refused:
		}
		if c.ctx.Err() != nil {
			continue
		}
		w := wireCompletion(cp)
		if c.writeFrame(session.OpCompletion, 0, w.Marshal()) != nil {
			c.kill()
		}
	}
}

// wireCompletion encodes a completion. Errors other than the engine's
// travel as a code; their text stays in the agent.
func wireCompletion(cp sessions.Completion) session.Completion {
	w := session.Completion{Job: cp.Job, Stats: cp.Stats, QueueNS: uint64(max(cp.Queued, 0)), EngineNS: uint64(max(cp.Engine, 0))}
	if cp.Err == nil {
		return w
	}
	var ee *alidnn.EngineError
	if errors.As(cp.Err, &ee) {
		w.Kind, w.Cause, w.PC = session.EngineFault, ee.Cause, ee.PC
		return w
	}
	w.Kind, w.Code = session.Failed, sessionCode(cp.Err)
	if w.Code == agentapi.CodeInternal {
		w.Message = cp.Err.Error()
	}
	return w
}

// kill ends the connection.
func (c *connLoop) kill() {
	c.cancel()
	c.conn.Close()
}

func (c *connLoop) writeFrame(op session.Op, id uint64, payload []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return session.WriteFrame(c.conn, &c.wbuf, op, id, payload)
}

func (c *connLoop) writeFD(op session.Op, id uint64, payload []byte, fd int) error {
	f := session.Frame{Op: op, Flags: session.FlagFD, ID: id, Payload: payload}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return session.WriteFD(c.uc, f.Marshal(), fd)
}

// writeErrorFrame answers request id with an OpError frame: once upgraded,
// the connection has no HTTP answer left to carry an agentapi.Error.
func (c *connLoop) writeErrorFrame(id uint64, code agentapi.Code, msg string) error {
	return c.writeFrame(session.OpError, id, session.ErrorPayload{Code: code, Message: msg}.Marshal())
}

func closeFD(fd int) { unix.Close(fd) }
