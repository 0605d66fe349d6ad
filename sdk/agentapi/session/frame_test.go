package session

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
)

func TestFrameRoundTrip(t *testing.T) {
	f := Frame{Op: OpWrite, ID: 42, Payload: append(U64s(7, 64), "hello"...)}
	got, err := ReadFrame(bytes.NewReader(f.Marshal()), MaxPayload)
	if err != nil {
		t.Fatal(err)
	}
	if got.Op != f.Op || got.ID != f.ID || !bytes.Equal(got.Payload, f.Payload) {
		t.Fatalf("got %+v, want %+v", got, f)
	}
	v, rest, err := ParseU64s(got.Payload, 2, true)
	if err != nil || v[0] != 7 || v[1] != 64 || string(rest) != "hello" {
		t.Fatalf("fields %v %q %v", v, rest, err)
	}
}

// writeCounter counts the Writes it is given.
type writeCounter struct {
	bytes.Buffer
	writes int
}

func (w *writeCounter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestWriteFrame: a small frame leaves in one Write (one TLS record), a
// large one in parts, and both read back whole.
func TestWriteFrame(t *testing.T) {
	var scratch []byte
	for _, tc := range []struct {
		name   string
		parts  [][]byte
		writes int
	}{
		{"small", [][]byte{U64s(1, 2), []byte("payload")}, 1},
		{"empty", nil, 1},
		{"large", [][]byte{U64s(3), bytes.Repeat([]byte{0xa5}, coalesceMax)}, 3},
	} {
		var w writeCounter
		if err := WriteFrame(&w, &scratch, OpWrite, 9, tc.parts...); err != nil {
			t.Fatal(err)
		}
		if w.writes != tc.writes {
			t.Errorf("%s: %d writes, want %d", tc.name, w.writes, tc.writes)
		}
		f, err := ReadFrame(&w, MaxPayload)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if want := bytes.Join(tc.parts, nil); f.Op != OpWrite || f.ID != 9 || !bytes.Equal(f.Payload, want) {
			t.Fatalf("%s: read back op %v id %d, %d payload bytes, want %d", tc.name, f.Op, f.ID, len(f.Payload), len(want))
		}
	}
}

func TestFrameRefusals(t *testing.T) {
	ok := (&Frame{Op: OpFree, ID: 1, Payload: U64s(1)}).Marshal()
	for name, b := range map[string][]byte{
		"unknown op":  func() []byte { b := bytes.Clone(ok); b[4] = 99; return b }(),
		"zero op":     func() []byte { b := bytes.Clone(ok); b[4] = 0; return b }(),
		"flag bits":   func() []byte { b := bytes.Clone(ok); b[5] = 0x80; return b }(),
		"reserved":    func() []byte { b := bytes.Clone(ok); b[7] = 1; return b }(),
		"too long":    AppendHeader(nil, OpWrite, 0, 1, MaxPayload+1),
		"short":       ok[:20],
		"header only": ok[:10],
	} {
		if _, err := ReadFrame(bytes.NewReader(b), MaxPayload); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ReadFrame(bytes.NewReader(ok[:20]), MaxPayload); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut payload: %v", err)
	}
}

func TestPayloads(t *testing.T) {
	s := Setup{Shm: true, Entries: 256, ControlSize: uint64(ControlSize(256)), Tenant: "alice"}
	if got, err := ParseSetup(s.Marshal()); err != nil || got != s {
		t.Errorf("setup %+v %v", got, err)
	}
	if _, err := ParseSetup(Setup{Entries: 3}.Marshal()); err == nil {
		t.Error("3 entries accepted")
	}
	e := ErrorPayload{Code: agentapi.CodeNotFound, Message: "no"}
	if got, err := ParseError(e.Marshal()); err != nil || got != e {
		t.Errorf("error %+v %v", got, err)
	}
	c := Completion{Job: 9, Kind: Failed, Code: "bad_handle", Message: "a message longer than thirty bytes, cut",
		Stats: alidnn.Stats{JobID: 1, Cycles: 2, Insns: 3, MACs: 4, LoadBytes: 5, StoreBytes: 6, BusyLoad: 7, BusyCompute: 8, BusyStore: 9, ClockMHz: 250}}
	got, err := ParseCompletion(c.Marshal())
	want := c
	want.Message = want.Message[:maxCompMsg]
	if err != nil || got != want {
		t.Errorf("completion %+v %v", got, err)
	}
	// A job that ran carries its profile where a failure has its code.
	done := Completion{Job: 10, Kind: EngineFault, Cause: alidnn.CauseDeadlock, PC: 4, QueueNS: 1234, EngineNS: 5678,
		Stats: alidnn.Stats{Cycles: 99, StallLoad: 1, StallCompute: 2, StallStore: 3, ClockMHz: 250}}
	if got, err := ParseCompletion(done.Marshal()); err != nil || got != done {
		t.Errorf("completion with a profile: %+v %v", got, err)
	}
	bad := done.Marshal()
	bad[CompletionSize-1] = 1
	if _, err := ParseCompletion(bad); !errors.Is(err, ErrFrame) {
		t.Errorf("bytes past the profile: %v, want ErrFrame", err)
	}
	prog := []isa.Insn{{Op: isa.OpFinish, JobID: 3}}
	b, err := EncodeProgram(prog)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeProgram(b); err != nil || len(got) != 1 || got[0] != prog[0] {
		t.Errorf("program %+v %v", got, err)
	}
	if _, err := DecodeProgram(b[:15]); err == nil {
		t.Error("15-byte program accepted")
	}
	if _, err := ParseSyncRequest(SyncRequest{Dir: 2}.Marshal()); err == nil {
		t.Error("sync direction 2 accepted")
	}
}
