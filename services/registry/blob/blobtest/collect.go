package blobtest

// The conformance cases of blob.Collect: marking, sweeping, grace periods
// and dry runs, against any Store.

import (
	"bytes"
	"context"
	"errors"
	"sort"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// setMarker is a blob.Marker over a fixed live set; err, when set, fails
// its mark.
type setMarker struct {
	live  map[blob.Digest]bool
	err   error
	swept []blob.Digest
}

func (m *setMarker) Live(_ context.Context, _ time.Time, fn func(blob.Digest) error) error {
	if m.err != nil {
		return m.err
	}
	for d := range m.live {
		if err := fn(d); err != nil {
			return err
		}
	}
	return nil
}

func (m *setMarker) Sweep(ctx context.Context, d blob.Digest, _ time.Time, remove func(context.Context) error) (bool, error) {
	m.swept = append(m.swept, d)
	if m.live[d] {
		return false, nil
	}
	return true, remove(ctx)
}

func testCollect(t *testing.T, open func() blob.Store, alg blob.Algorithm) {
	s := open()
	c := ctx(t)
	keep, drop := random(t, 1000), random(t, 2000)
	dk, dd := put(t, s, alg, keep).Digest, put(t, s, alg, drop).Digest
	u, err := s.Begin(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := u.Write(c, bytes.NewReader([]byte("stale"))); err != nil {
		t.Fatal(err)
	}
	m := &setMarker{live: map[blob.Digest]bool{dk: true}}

	// Within the grace period nothing goes.
	res, err := blob.Collect(c, s, m, blob.GCOptions{GracePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scanned != 2 || res.Live != 1 || res.Candidates != 0 || res.Deleted != 0 || res.UploadsAborted != 0 {
		t.Fatalf("Collect within grace: %+v", res)
	}
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	// A dry run reports without deleting, and sweeps nothing.
	var reported []blob.Digest
	var aborted []string
	res, err = blob.Collect(c, s, m, blob.GCOptions{Now: later, DryRun: true,
		Removed: func(i blob.Info) { reported = append(reported, i.Digest) },
		Aborted: func(u blob.UploadInfo) { aborted = append(aborted, u.ID) }})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 || res.FreedBytes != 2000 || res.UploadsAborted != 1 || len(m.swept) != 0 {
		t.Fatalf("dry run: %+v, swept %v", res, m.swept)
	}
	if len(reported) != 1 || reported[0] != dd || len(aborted) != 1 || aborted[0] != u.ID() {
		t.Fatalf("dry run reported %v and %v", reported, aborted)
	}
	if _, err := s.Stat(c, dd); err != nil {
		t.Fatalf("dry run deleted: %v", err)
	}
	// A failing mark stops the collection.
	bad := errors.New("database down")
	_, err = blob.Collect(c, s, &setMarker{err: bad}, blob.GCOptions{Now: later})
	wantErr(t, "Collect with failing mark", err, bad)
	if _, err := s.Stat(c, dd); err != nil {
		t.Fatalf("failed Collect deleted: %v", err)
	}
	// Blobs the sweep finds live (referenced after the mark) stay.
	sweepLive := &setMarker{live: map[blob.Digest]bool{dk: true, dd: true}}
	res, err = blob.Collect(c, s, markOnly{m: &setMarker{}, sweep: sweepLive}, blob.GCOptions{Now: later, UploadTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	if res.Candidates != 2 || res.Deleted != 0 || len(sweepLive.swept) != 2 {
		t.Fatalf("Collect with everything live at the sweep: %+v, swept %v", res, sweepLive.swept)
	}

	m = &setMarker{live: map[blob.Digest]bool{dk: true}}
	res, err = blob.Collect(c, s, m, blob.GCOptions{Now: later})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deleted != 1 || res.FreedBytes != 2000 || res.UploadsAborted != 1 {
		t.Fatalf("Collect: %+v", res)
	}
	_, err = s.Stat(c, dd)
	wantErr(t, "Stat of collected blob", err, blob.ErrNotFound)
	mustRead(t, s, dk, 0, -1, keep)
	_, err = s.Resume(c, u.ID())
	wantErr(t, "Resume of collected upload", err, blob.ErrNotFound)
	var left []blob.Digest
	if err := s.List(c, func(i blob.Info) error { left = append(left, i.Digest); return nil }); err != nil {
		t.Fatal(err)
	}
	sort.Slice(left, func(i, j int) bool { return left[i] < left[j] })
	if len(left) != 1 || left[0] != dk {
		t.Fatalf("left after Collect: %v", left)
	}
}

// markOnly marks with m and sweeps with sweep: a blob that became live
// between the two phases.
type markOnly struct {
	m     *setMarker
	sweep *setMarker
}

func (x markOnly) Live(ctx context.Context, cutoff time.Time, fn func(blob.Digest) error) error {
	return x.m.Live(ctx, cutoff, fn)
}

func (x markOnly) Sweep(ctx context.Context, d blob.Digest, cutoff time.Time, remove func(context.Context) error) (bool, error) {
	return x.sweep.Sweep(ctx, d, cutoff, remove)
}
