package meta_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// TestReserveUploadBodyRace: admissions racing on two stores (replicas) of
// one database never admit more bodies, or reserve more bytes, than the
// limits; refusals wrap ErrTooManyBodies or ErrStagingFull.
func TestReserveUploadBodyRace(t *testing.T) {
	pool := testenv.RegistryDB(t)
	stores := []*meta.Store{meta.New(pool), meta.New(pool)}
	ctx := context.Background()
	lim := meta.BodyLimits{MaxBodies: 5, MaxStaged: 1000}
	const tries = 40
	var (
		mu       sync.Mutex
		admitted int
		reserved int64
		wg       sync.WaitGroup
	)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := meta.UploadBody{ID: fmt.Sprint("body-", i), Replica: fmt.Sprint("r", i%2), Account: "a"}
			got, err := stores[i%2].ReserveUploadBody(ctx, b, 300, 100, lim, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				admitted++
				reserved += got
			case !errors.Is(err, meta.ErrTooManyBodies) && !errors.Is(err, meta.ErrStagingFull):
				t.Errorf("body %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	// 300 + 300 + 300 + 100 fit in 1000: four bodies, all of the room.
	if admitted != 4 || reserved != 1000 {
		t.Errorf("admitted %d bodies reserving %d bytes; want 4 reserving 1000", admitted, reserved)
	}
	// A new body of another account is not affected.
	if _, err := stores[0].ReserveUploadBody(ctx, meta.UploadBody{ID: "other", Account: "b"}, 300, 300, lim, time.Minute); err != nil {
		t.Errorf("account b: %v", err)
	}
	// A body that expired no longer counts; ending one makes room too.
	if _, err := stores[1].ReserveUploadBody(ctx, meta.UploadBody{ID: "short", Account: "c"}, 1000, 1000, lim, time.Microsecond); err != nil {
		t.Fatal(err)
	}
	eventually := time.Now().Add(time.Minute)
	for {
		_, err := stores[0].ReserveUploadBody(ctx, meta.UploadBody{ID: "after", Account: "c"}, 1000, 1000, lim, time.Minute)
		if err == nil {
			break
		}
		if !errors.Is(err, meta.ErrStagingFull) || time.Now().After(eventually) {
			t.Fatalf("after the lease: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := stores[0].EndUploadBody(ctx, "after"); err != nil {
		t.Fatal(err)
	}
	if _, err := stores[1].ReserveUploadBody(ctx, meta.UploadBody{ID: "again", Account: "c"}, 1000, 1000, lim, time.Minute); err != nil {
		t.Errorf("after the end of a body: %v", err)
	}
}
