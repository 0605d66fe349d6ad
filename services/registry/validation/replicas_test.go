package validation_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// TestTwoWorkersOneDies: two workers (two replicas) run over the same
// jobs; worker A, with a short lease, is stopped in the middle of its
// first job (its context cancelled, as when its process dies). Every job
// still ends available exactly once: one countersignature each, and no
// job run to completion by both.
func TestTwoWorkersOneDies(t *testing.T) {
	e := setup(t)
	var refs []name.Digest
	for i := range 3 {
		img, _ := buildImage(t, false, nil)
		refs = append(refs, e.push(t, fmt.Sprintf("two%d", i), img, e.isv))
	}
	a := e.worker(t, "A", 300*time.Millisecond)
	b := e.worker(t, "B", time.Minute)
	actx, stopA := context.WithCancel(t.Context())
	bctx, stopB := context.WithCancel(t.Context())
	aDone, bDone := make(chan error, 1), make(chan error, 1)
	go func() { aDone <- a.Run(actx) }()
	// A takes the first job; B starts once A holds it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var n int
		if err := e.pool.QueryRow(t.Context(), `select count(*) from validation_jobs where lease_owner = 'A'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("worker A claimed no job")
		}
		time.Sleep(time.Millisecond)
	}
	stopA()
	go func() { bDone <- b.Run(bctx) }()
	for {
		var open int
		if err := e.pool.QueryRow(t.Context(), `select count(*) from validation_jobs where state not in ('available', 'failed')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs still open", open)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopB()
	if err := <-aDone; err != nil {
		t.Error(err)
	}
	if err := <-bDone; err != nil {
		t.Error(err)
	}
	for _, ref := range refs {
		j := e.job(t, ref)
		if j.State != "available" || len(j.Reasons) != 0 {
			t.Errorf("%s: %+v, want available", ref, j)
		}
		if n := e.countersignatures(t, ref); n != 1 {
			t.Errorf("%s: %d countersignatures, want 1", ref, n)
		}
		t.Logf("%s: %s after %d attempt(s)", ref.Context().RepositoryStr(), j.State, j.Attempts)
	}
}
