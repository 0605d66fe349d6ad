package tracefile_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/faas/tracefile"
)

// sample is a small trace with a record of every kind.
func sample(t testing.TB) []byte {
	var b bytes.Buffer
	w, err := tracefile.NewWriter(&b, tracefile.Header{Tenant: "alice", Role: "alidnn", RoleVersion: "1.0"})
	if err != nil {
		t.Fatal(err)
	}
	w.RecordAlloc(0x1000, 4096)
	w.RecordWrite(0x1000, 8, []byte("input"))
	w.RecordProgram(1, []isa.Insn{{Op: isa.OpFinish, JobID: 1}})
	w.RecordSubmit(1, 1)
	w.RecordDone(1, alidnn.Stats{Cycles: 9, Insns: 1}, false)
	w.RecordRead(0x1000, 8, []byte("output"))
	w.RecordFreeProgram(1)
	w.RecordFree(0x1000)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestRoundTrip(t *testing.T) {
	tr, err := tracefile.Parse(sample(t))
	if err != nil {
		t.Fatal(err)
	}
	kinds := []tracefile.Kind{tracefile.KindAlloc, tracefile.KindWrite, tracefile.KindProgram, tracefile.KindSubmit,
		tracefile.KindDone, tracefile.KindRead, tracefile.KindFreeProgram, tracefile.KindFree}
	if len(tr.Records) != len(kinds) || tr.Header.RoleVersion != "1.0" {
		t.Fatalf("read back %+v", tr)
	}
	for i, k := range kinds {
		if tr.Records[i].Kind != k {
			t.Errorf("record %d: kind %d, want %d", i, tr.Records[i].Kind, k)
		}
	}
	if r := tr.Records[5]; string(r.Data) != "output" || r.Off != 8 || r.Addr != 0x1000 {
		t.Errorf("read record %+v", r)
	}
	if r := tr.Records[6]; r.ID != 1 {
		t.Errorf("program free record %+v, want program 1", r)
	}
	if r := tr.Records[4]; r.Stats.Cycles != 9 || r.Failed {
		t.Errorf("done record %+v", r)
	}
}

// TestEveryByteCovered: changing any byte of a trace makes it refused.
func TestEveryByteCovered(t *testing.T) {
	good := sample(t)
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		if _, err := tracefile.Parse(b); !errors.Is(err, tracefile.ErrFormat) {
			t.Fatalf("byte %d changed: %v, want ErrFormat", i, err)
		}
	}
}

// FuzzParse: any input is a trace or ErrFormat, never a panic.
func FuzzParse(f *testing.F) {
	good := sample(f)
	f.Add(good)
	f.Add(good[:len(good)-1])
	f.Add([]byte("FAASTRC\x00\x01\x00\x00\x00\x02\x00\x00\x00{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := tracefile.Parse(data)
		if err != nil && !errors.Is(err, tracefile.ErrFormat) {
			t.Fatalf("error %v does not wrap ErrFormat", err)
		}
	})
}
