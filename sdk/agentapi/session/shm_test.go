package session

import (
	"errors"
	"sync"
	"testing"
)

func newPair(t *testing.T, entries uint32) (agent, client *Control) {
	t.Helper()
	fd, mem, err := Memfd("test", ControlSize(entries))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmap(mem) })
	cmem, err := MapFD(fd, uint64(ControlSize(entries)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unmap(cmem) })
	if agent, err = NewControl(mem, entries); err != nil {
		t.Fatal(err)
	}
	agent.Init()
	if client, err = NewControl(cmem, entries); err != nil {
		t.Fatal(err)
	}
	if err := client.Check(); err != nil {
		t.Fatal(err)
	}
	return agent, client
}

func TestRingsAcrossMappings(t *testing.T) {
	agent, client := newPair(t, 4)
	for i := range 4 {
		if ok, _ := client.PushSubmit(SubmitEntry{Prog: 1, Job: uint64(i)}); !ok {
			t.Fatalf("push %d refused", i)
		}
	}
	if ok, _ := client.PushSubmit(SubmitEntry{}); ok {
		t.Fatal("push into a full ring accepted")
	}
	for i := range 4 {
		e, ok, err := agent.PopSubmit()
		if !ok || err != nil || e.Job != uint64(i) {
			t.Fatalf("pop %d: %+v %v %v", i, e, ok, err)
		}
		if ok, _, err := agent.PushCompletion(&Completion{Job: e.Job}); !ok || err != nil {
			t.Fatalf("completion %d: %v %v", i, ok, err)
		}
	}
	if _, ok, _ := agent.PopSubmit(); ok {
		t.Fatal("pop from an empty ring")
	}
	if ok, _, _ := agent.PushCompletion(&Completion{}); ok {
		t.Fatal("completion into a full ring accepted")
	}
	for i := range 4 {
		c, ok, err := client.PopCompletion()
		if !ok || err != nil || c.Job != uint64(i) {
			t.Fatalf("completion %d: %+v %v %v", i, c, ok, err)
		}
	}
}

func TestDoorbellFlags(t *testing.T) {
	agent, client := newPair(t, 4)
	if _, wake := client.PushSubmit(SubmitEntry{}); wake {
		t.Fatal("doorbell asked while the agent is awake")
	}
	agent.SleepSubmit()
	if _, wake := client.PushSubmit(SubmitEntry{}); !wake {
		t.Fatal("no doorbell for a sleeping agent")
	}
	if agent.WakeSubmit() {
		t.Fatal("the flag survived the client's doorbell")
	}
	client.SleepCompletions()
	if _, wake, _ := agent.PushCompletion(&Completion{}); !wake {
		t.Fatal("no doorbell for a waiting client")
	}
	if _, wake, _ := agent.PushCompletion(&Completion{}); wake {
		t.Fatal("second doorbell without a new wait")
	}
}

// TestCorruptIndices: the agent refuses indices a hostile client wrote.
func TestCorruptIndices(t *testing.T) {
	agent, client := newPair(t, 4)
	client.word(offSQTail).Store(1000)
	if _, _, err := agent.PopSubmit(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("tail far ahead: %v", err)
	}
	client.word(offCQHead).Store(5)
	if _, _, err := agent.PushCompletion(&Completion{}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("head beyond tail: %v", err)
	}
	// The agent never reads back the head it owns.
	client.word(offSQTail).Store(0)
	client.word(offSQHead).Store(77)
	if _, ok, err := agent.PopSubmit(); ok || err != nil {
		t.Errorf("forged head: %v %v", ok, err)
	}
}

// TestRingsConcurrent moves entries between two goroutines, as between the
// processes, and checks order and completeness (run with -race).
func TestRingsConcurrent(t *testing.T) {
	agent, client := newPair(t, 8)
	const n = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for got := 0; got < n; {
			e, ok, err := agent.PopSubmit()
			if err != nil {
				t.Error(err)
				return
			}
			if !ok {
				continue
			}
			if e.Job != uint64(got) {
				t.Errorf("job %d, want %d", e.Job, got)
				return
			}
			for {
				if ok, _, _ := agent.PushCompletion(&Completion{Job: e.Job}); ok {
					break
				}
			}
			got++
		}
	}()
	next := 0
	for sent := 0; next < n; {
		if sent < n {
			if ok, _ := client.PushSubmit(SubmitEntry{Job: uint64(sent)}); ok {
				sent++
			}
		}
		if c, ok, _ := client.PopCompletion(); ok {
			if c.Job != uint64(next) {
				t.Fatalf("completion %d, want %d", c.Job, next)
			}
			next++
		}
	}
	wg.Wait()
}
