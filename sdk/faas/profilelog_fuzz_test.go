package faas_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
)

// FuzzReadProfileLog: any input is read or refused with ErrProfileLog (or
// an I/O error), never a panic, and what is read writes back the same.
func FuzzReadProfileLog(f *testing.F) {
	var good bytes.Buffer
	t0 := time.Unix(1_800_000_000, 5)
	faas.WriteProfileLog(&good, faas.ProfileLog{Tenant: "alice", Slot: 1, Profiles: []faas.Profile{
		{Job: 1, Submitted: t0, Completed: t0.Add(time.Millisecond), QueueWait: 3, Engine: 4, Stats: alidnn.Stats{Cycles: 9, ClockMHz: 250}},
	}})
	f.Add(good.Bytes())
	f.Add([]byte(`{"format":"faas-profile-log","version":1,"tenant":"a","slot":0,"jobs":0}` + "\n"))
	f.Add([]byte(`{"format":"faas-profile-log","version":2}`))
	f.Add([]byte(`{"format":"faas-profile-log","version":1,"jobs":1}` + "\n" + `{"job":1,"submitted_ns":5,"completed_ns":4}`))
	f.Add([]byte("not json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := faas.ReadProfileLog(bytes.NewReader(data))
		if err != nil {
			if !errors.Is(err, faas.ErrProfileLog) {
				t.Fatalf("error %v does not wrap ErrProfileLog", err)
			}
			return
		}
		var out bytes.Buffer
		if err := faas.WriteProfileLog(&out, l); err != nil {
			t.Fatal(err)
		}
		back, err := faas.ReadProfileLog(&out)
		if err != nil || len(back.Profiles) != len(l.Profiles) || back.Tenant != l.Tenant || back.Slot != l.Slot {
			t.Fatalf("written back: %v", err)
		}
	})
}
