package server_test

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// FuzzSessionFrames sends whatever bytes the fuzzer makes up on an open
// session of a real agent: the agent must answer or hang up, never crash
// or hang, and keep serving sessions afterwards. (Every input is followed
// by the end of the client's stream: a frame cut short waits for its bytes,
// as it must.)
func FuzzSessionFrames(f *testing.F) {
	frames := func(fs ...session.Frame) []byte {
		var b []byte
		for _, fr := range fs {
			b = append(b, fr.Marshal()...)
		}
		return b
	}
	prog, _ := session.EncodeProgram([]isa.Insn{{Op: isa.OpFinish, JobID: 1}})
	f.Add(frames(session.Frame{Op: session.OpAlloc, ID: 2, Payload: session.U64s(4096)}))
	f.Add(frames(session.Frame{Op: session.OpAlloc, ID: 2, Payload: session.U64s(4096)},
		session.Frame{Op: session.OpWrite, ID: 3, Payload: append(session.U64s(1, 0), make([]byte, 64)...)},
		session.Frame{Op: session.OpRead, ID: 4, Payload: session.U64s(1, 0, 64)}))
	f.Add(frames(session.Frame{Op: session.OpProgram, ID: 2, Payload: prog},
		session.Frame{Op: session.OpSubmit, Payload: session.U64s(1, 1)}))
	f.Add(frames(session.Frame{Op: session.OpSync, ID: 2, Payload: session.SyncRequest{Handle: 1, Len: 64}.Marshal()},
		session.Frame{Op: session.OpFree, ID: 3, Payload: session.U64s(1)},
		session.Frame{Op: session.OpDoorbell}))
	f.Add(frames(session.Frame{Op: session.OpRead, ID: 2, Payload: session.U64s(1, 0, 1<<40)}))
	f.Add(frames(session.Frame{Op: session.OpProgram, ID: 2, Payload: prog},
		session.Frame{Op: session.OpSubmit, Payload: session.U64s(1, 7)},
		session.Frame{Op: session.OpCancel, ID: 3, Payload: session.U64s(7)},
		session.Frame{Op: session.OpCancel, ID: 4, Payload: []byte{1}}))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add(session.AppendHeader(nil, session.OpWrite, 0, 1, session.MaxPayload))

	a := startSessAgent(f, sessOptions{})
	f.Fuzz(func(t *testing.T, in []byte) {
		var r *rawSession
		var err error
		for range 100 { // windows of earlier inputs' sessions may still be closing
			if r, err = tryRaw(a.socket, "fuzz", 0); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		defer r.conn.Close()
		r.conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := r.conn.Write(in); err != nil {
			return // the agent hung up already
		}
		// End of input: whatever it was, the agent must answer what it
		// could and hang up.
		r.conn.(*net.UnixConn).CloseWrite()
		for {
			if _, err := session.ReadFrame(r.br, session.MaxPayload); err != nil {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the agent did not hang up: %v", err)
				}
				return
			}
		}
	})
}
