package session

import (
	"bytes"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

// FuzzFrame feeds the decoders everything a peer can send: a frame, then
// its payload to each payload parser. None may panic; what ReadFrame
// accepts must re-encode to the same bytes.
func FuzzFrame(f *testing.F) {
	f.Add((&Frame{Op: OpHello, ID: 1, Payload: Hello{Version: 1, Flags: HelloShm}.Marshal()}).Marshal())
	f.Add((&Frame{Op: OpReply, Flags: FlagFD, ID: 1, Payload: Setup{Shm: true, Entries: 256, ControlSize: uint64(ControlSize(256)), Tenant: "t"}.Marshal()}).Marshal())
	f.Add((&Frame{Op: OpAlloc, ID: 2, Payload: U64s(4096)}).Marshal())
	f.Add((&Frame{Op: OpReply, ID: 2, Payload: AllocReply{1, 2, 3, 4096}.Marshal()}).Marshal())
	f.Add((&Frame{Op: OpSync, ID: 3, Payload: SyncRequest{1, 0, 64, FromDevice}.Marshal()}).Marshal())
	f.Add((&Frame{Op: OpWrite, ID: 4, Payload: append(U64s(1, 0), make([]byte, 64)...)}).Marshal())
	f.Add((&Frame{Op: OpProgram, ID: 5, Payload: make([]byte, 16)}).Marshal())
	f.Add((&Frame{Op: OpSubmit, Payload: U64s(1, 2)}).Marshal())
	f.Add((&Frame{Op: OpCompletion, Payload: (&Completion{Job: 1, Kind: Failed, Code: "x", Message: "y"}).Marshal()}).Marshal())
	f.Add((&Frame{Op: OpCompletion, Payload: (&Completion{Job: 2, QueueNS: 7, EngineNS: 8, Stats: alidnn.Stats{Cycles: 9, StallCompute: 3}}).Marshal()}).Marshal())
	f.Add((&Frame{Op: OpError, ID: 6, Payload: ErrorPayload{Code: "bad_handle", Message: "no"}.Marshal()}).Marshal())
	f.Add((&Frame{Op: OpDoorbell}).Marshal())
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := ReadFrame(bytes.NewReader(b), 1<<16)
		if err != nil {
			return
		}
		if re := fr.Marshal(); !bytes.Equal(re, b[:len(re)]) {
			t.Fatalf("re-encoding differs")
		}
		p := fr.Payload
		ParseHello(p)
		ParseSetup(p)
		ParseAllocReply(p)
		ParseSyncRequest(p)
		ParseSubmit(p)
		ParseError(p)
		ParseU64s(p, 2, true)
		DecodeProgram(p)
		if c, err := ParseCompletion(p); err == nil {
			if got, err := ParseCompletion(c.Marshal()); err != nil || got != c {
				t.Fatalf("completion round trip: %+v, %v", got, err)
			}
		}
	})
}
