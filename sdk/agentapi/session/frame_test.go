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
