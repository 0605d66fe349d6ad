package traceevent_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/traceevent"
)

// logs makes two tenants' sessions on slot 0 whose jobs take turns.
func logs() []faas.ProfileLog {
	t0 := time.Unix(1_800_000_000, 0)
	var out []faas.ProfileLog
	for k, tenant := range []string{"alice", "bob"} {
		l := faas.ProfileLog{Tenant: tenant, Slot: 0}
		for j := range 5 {
			sub := t0.Add(time.Duration(2*j+k) * 100 * time.Microsecond)
			l.Profiles = append(l.Profiles, faas.Profile{
				Job: uint64(j + 1), Submitted: sub, Completed: sub.Add(80 * time.Microsecond),
				QueueWait: time.Duration(10+j) * time.Microsecond, Engine: 50 * time.Microsecond,
				Stats: alidnn.Stats{Cycles: 10000, MACs: 1 << 20, LoadBytes: 4096, StoreBytes: 1024, BusyLoad: 4000,
					BusyCompute: 9000, BusyStore: 500, StallCompute: 900, StallStore: 9400, ClockMHz: 250},
			})
		}
		out = append(out, l)
	}
	return out
}

// TestExportValid: the trace of two tenants' jobs passes the trace-event
// format's rules, has a track per queue and per tenant, and keeps the
// numbers.
func TestExportValid(t *testing.T) {
	var buf bytes.Buffer
	if err := traceevent.Write(&buf, logs()...); err != nil {
		t.Fatal(err)
	}
	names := checkTrace(t, buf.Bytes())
	for _, want := range []string{"tenant alice/jobs", "tenant bob/jobs", "slot 0 (AliDNN engine)/load",
		"slot 0 (AliDNN engine)/compute", "slot 0 (AliDNN engine)/store"} {
		if names[want] == 0 {
			t.Errorf("no slices on track %q; tracks: %v", want, names)
		}
	}
	if names["tenant alice/jobs"] != 15 { // a job, its queue wait and its run, 5 times
		t.Errorf("alice's track has %d slices, want 15", names["tenant alice/jobs"])
	}
}

// TestExportPipelined: jobs in flight together, as a pipelined session
// submits them, and engine runs whose estimated starts overlap still give
// a valid trace.
func TestExportPipelined(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	l := faas.ProfileLog{Tenant: "alice", Slot: 1}
	for j := range 8 {
		sub := t0.Add(time.Duration(j) * 10 * time.Microsecond)
		l.Profiles = append(l.Profiles, faas.Profile{Job: uint64(j + 1), Submitted: sub, Completed: sub.Add(100 * time.Microsecond),
			QueueWait: time.Duration(j) * 5 * time.Microsecond, Engine: 30 * time.Microsecond,
			Stats: alidnn.Stats{Cycles: 100, BusyLoad: 60, BusyCompute: 100, BusyStore: 10, ClockMHz: 250}})
	}
	var buf bytes.Buffer
	if err := traceevent.Write(&buf, l); err != nil {
		t.Fatal(err)
	}
	names := checkTrace(t, buf.Bytes())
	if names["tenant alice/jobs 2"] == 0 || names["slot 1 (AliDNN engine)/compute"] != 8 {
		t.Errorf("tracks %v: want jobs on several tracks and 8 compute slices", names)
	}
}

// TestProfileLogRoundTrip: the log file gives back what was written, and
// its export is the same.
func TestProfileLogRoundTrip(t *testing.T) {
	var want, got bytes.Buffer
	for _, l := range logs() {
		var file bytes.Buffer
		if err := faas.WriteProfileLog(&file, l); err != nil {
			t.Fatal(err)
		}
		back, err := faas.ReadProfileLog(&file)
		if err != nil {
			t.Fatal(err)
		}
		if back.Tenant != l.Tenant || len(back.Profiles) != len(l.Profiles) || !back.Profiles[3].Submitted.Equal(l.Profiles[3].Submitted) ||
			back.Profiles[3].Stats != l.Profiles[3].Stats || back.Profiles[3].QueueWait != l.Profiles[3].QueueWait {
			t.Fatalf("read back %+v", back.Profiles[3])
		}
		traceevent.Write(&want, l)
		traceevent.Write(&got, back)
	}
	if !bytes.Equal(want.Bytes(), got.Bytes()) {
		t.Error("the export of the read-back log differs")
	}
}

// checkTrace fails t unless data is a valid trace; it returns the slices
// per track.
func checkTrace(t *testing.T, data []byte) map[string]int {
	t.Helper()
	counts, err := traceevent.Validate(data)
	if err != nil {
		t.Fatal(err)
	}
	return counts
}

// TestValidateRefuses: the checks can fail.
func TestValidateRefuses(t *testing.T) {
	const meta = `{"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"p"}},{"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"t"}}`
	for name, events := range map[string]string{
		"overlap":   meta + `,{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"b","ph":"X","ts":5,"dur":10,"pid":1,"tid":1}`,
		"negative":  meta + `,{"name":"a","ph":"X","ts":-1,"dur":1,"pid":1,"tid":1}`,
		"no dur":    meta + `,{"name":"a","ph":"X","ts":0,"pid":1,"tid":1}`,
		"unnamed":   `{"name":"a","ph":"X","ts":0,"dur":1,"pid":2,"tid":1}`,
		"float pid": meta + `,{"name":"a","ph":"X","ts":0,"dur":1,"pid":1.5,"tid":1}`,
		"phase":     meta + `,{"name":"a","ph":"Q","ts":0,"pid":1,"tid":1}`,
	} {
		if _, err := traceevent.Validate([]byte(`{"displayTimeUnit":"ns","traceEvents":[` + events + `]}`)); !errors.Is(err, traceevent.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	good := `{"displayTimeUnit":"ns","traceEvents":[` + meta + `,{"name":"a","ph":"X","ts":0,"dur":10,"pid":1,"tid":1},{"name":"b","ph":"X","ts":2,"dur":3,"pid":1,"tid":1}]}`
	if _, err := traceevent.Validate([]byte(good)); err != nil {
		t.Errorf("nested slices: %v", err)
	}
}
