package server_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// rawSession speaks the session protocol by hand, frames only (no shared
// memory), one request at a time: an attacker, or a victim that tells the
// test its handles, is not limited to what the SDK sends.
type rawSession struct {
	conn net.Conn
	br   *bufio.Reader
	id   uint64
	// completions seen while waiting for replies
	comps []session.Completion
}

func dialRaw(t testing.TB, socket, tenant string, slot int) *rawSession {
	t.Helper()
	r, err := tryRaw(socket, tenant, slot)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.conn.Close() })
	return r
}

func tryRaw(socket, tenant string, slot int) (*rawSession, error) {
	conn, err := net.Dial("unix", socket)
	if err != nil {
		return nil, err
	}
	conn.SetDeadline(time.Now().Add(time.Minute))
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://faasd/v1/slots/%d/session", slot), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", session.Protocol)
	req.Header.Set("Authorization", "Bearer "+tenantToken(tenant))
	if err := req.Write(conn); err != nil {
		return nil, err
	}
	r := &rawSession{conn: conn, br: bufio.NewReader(conn)}
	resp, err := http.ReadResponse(r.br, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		return nil, fmt.Errorf("upgrade: %s", resp.Status)
	}
	op, p, err := r.call(session.OpHello, session.Hello{Version: session.Version}.Marshal())
	if err != nil || op != session.OpReply {
		return nil, fmt.Errorf("hello: %v %v", op, err)
	}
	if _, err := session.ParseSetup(p); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *rawSession) send(op session.Op, id uint64, payload []byte) error {
	f := session.Frame{Op: op, ID: id, Payload: payload}
	_, err := r.conn.Write(f.Marshal())
	return err
}

// call sends a request and returns the reply's op and payload.
func (r *rawSession) call(op session.Op, payload []byte) (session.Op, []byte, error) {
	r.id++
	if err := r.send(op, r.id, payload); err != nil {
		return 0, nil, err
	}
	for {
		f, err := session.ReadFrame(r.br, session.MaxPayload)
		if err != nil {
			return 0, nil, err
		}
		if f.Op == session.OpCompletion {
			c, err := session.ParseCompletion(f.Payload)
			if err != nil {
				return 0, nil, err
			}
			r.comps = append(r.comps, c)
			continue
		}
		if f.ID != r.id {
			return 0, nil, fmt.Errorf("reply to %d, want %d", f.ID, r.id)
		}
		return f.Op, f.Payload, nil
	}
}

// code is the error code of a call; "" for success.
func (r *rawSession) code(op session.Op, payload []byte) (agentapi.Code, []byte, error) {
	rop, p, err := r.call(op, payload)
	if err != nil {
		return "", nil, err
	}
	if rop == session.OpError {
		e, err := session.ParseError(p)
		return e.Code, nil, err
	}
	return "", p, nil
}

func (r *rawSession) alloc(size uint64) (session.AllocReply, error) {
	code, p, err := r.code(session.OpAlloc, session.U64s(size))
	if err != nil || code != "" {
		return session.AllocReply{}, fmt.Errorf("alloc: %v %s", err, code)
	}
	return session.ParseAllocReply(p)
}

func (r *rawSession) program(insns []isa.Insn) (uint64, agentapi.Code, error) {
	b, err := session.EncodeProgram(insns)
	if err != nil {
		return 0, "", err
	}
	code, p, err := r.code(session.OpProgram, b)
	if err != nil || code != "" {
		return 0, code, err
	}
	v, _, err := session.ParseU64s(p, 1, false)
	if err != nil {
		return 0, "", err
	}
	return v[0], "", nil
}

// run submits program h as job id and waits for its completion.
func (r *rawSession) run(ctx context.Context, h, id uint64) (session.Completion, error) {
	if err := r.send(session.OpSubmit, 0, session.U64s(h, id)); err != nil {
		return session.Completion{}, err
	}
	for {
		for i, c := range r.comps {
			if c.Job == id {
				r.comps = append(r.comps[:i], r.comps[i+1:]...)
				return c, nil
			}
		}
		f, err := session.ReadFrame(r.br, session.MaxPayload)
		if err != nil {
			return session.Completion{}, err
		}
		if f.Op != session.OpCompletion {
			return session.Completion{}, fmt.Errorf("unexpected %v", f.Op)
		}
		c, err := session.ParseCompletion(f.Payload)
		if err != nil {
			return session.Completion{}, err
		}
		r.comps = append(r.comps, c)
	}
}

func asm(t testing.TB, format string, args ...any) []isa.Insn {
	t.Helper()
	p, err := isa.Assemble(fmt.Sprintf(format, args...))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// rawShm opens a session that asks for shared memory and returns the
// connection and the mapped control block, for tests that break the rings.
func rawShm(t testing.TB, socket, tenant string, slot int) (*net.UnixConn, *bufio.Reader, []byte) {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	uc := c.(*net.UnixConn)
	t.Cleanup(func() { uc.Close() })
	fc := session.NewFDConn(uc)
	br := bufio.NewReader(fc)
	req, _ := http.NewRequest("POST", fmt.Sprintf("http://faasd/v1/slots/%d/session", slot), nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", session.Protocol)
	req.Header.Set("Authorization", "Bearer "+tenantToken(tenant))
	if err := req.Write(uc); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, req); err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	hello := session.Frame{Op: session.OpHello, ID: 1, Payload: session.Hello{Version: session.Version, Flags: session.HelloShm}.Marshal()}
	if _, err := uc.Write(hello.Marshal()); err != nil {
		t.Fatal(err)
	}
	f, err := session.ReadFrame(br, session.MaxPayload)
	if err != nil || f.Op != session.OpReply || f.Flags != session.FlagFD {
		t.Fatalf("setup: %+v %v", f, err)
	}
	st, err := session.ParseSetup(f.Payload)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := fc.TakeFD()
	if err != nil {
		t.Fatal(err)
	}
	mem, err := session.MapFD(fd, st.ControlSize)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { session.Unmap(mem) })
	return uc, br, mem
}
