package blob

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// DefaultGracePeriod is GCOptions.GracePeriod's default, Harbor's time
// window for the same purpose.
const DefaultGracePeriod = 2 * time.Hour

// GCOptions tune Collect. The zero value is usable.
type GCOptions struct {
	// GracePeriod keeps blobs committed, linked or held more recently than
	// this even when unreferenced. It must exceed the longest push, from
	// its first blob to its manifest: a blob older than this that no
	// manifest references yet may go. Default DefaultGracePeriod.
	GracePeriod time.Duration
	// UploadTTL aborts uploads whose staged data was last written longer
	// ago than this. Default 24 hours; negative: never.
	UploadTTL time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Removed, when set, is called for every blob removed (or, in a dry
	// run, to be removed), Aborted for every upload aborted (or to be).
	Removed func(Info)
	Aborted func(UploadInfo)
	// Progress, when set, is called with the counts so far after the mark,
	// every ProgressEvery blobs listed, and after the sweep.
	Progress func(GCResult)
}

// ProgressEvery is how many listed blobs separate two GCOptions.Progress calls.
const ProgressEvery = 1000

// GCResult counts what Collect did.
type GCResult struct {
	Live           int   // blobs the mark found live
	Scanned        int   // blobs listed
	Candidates     int   // listed blobs neither live nor recent
	Deleted        int   // blobs removed (or, in a dry run, to remove)
	FreedBytes     int64 // their size
	UploadsAborted int   // stale uploads removed
}

// Marker is the metadata side of Collect: the registry's is meta.GC.
type Marker interface {
	// Live calls fn with every blob that must stay (the mark): referenced,
	// or linked, recorded or held after cutoff. An error of fn stops it
	// and is returned.
	Live(ctx context.Context, cutoff time.Time, fn func(Digest) error) error
	// Sweep removes blob d if it is still not live: it drops what names d
	// and calls remove to delete the bytes, keeping new references to d
	// and new commits of it waiting until remove returned. It reports
	// whether it removed d; false with a nil error means d was live.
	Sweep(ctx context.Context, d Digest, cutoff time.Time, remove func(context.Context) error) (bool, error)
}

// Collect is a mark-and-sweep garbage collection of s. It asks m for the
// live blobs, lists s, and removes through m.Sweep every blob that is not
// live and whose bytes were committed longer than GracePeriod ago; then it
// aborts uploads idle for longer than UploadTTL. Before sweeping a blob it
// stats it again and keeps it if it was committed meanwhile. A dry run does
// not call Sweep, so it reports what the mark alone would remove.
func Collect(ctx context.Context, s Store, m Marker, opt GCOptions) (GCResult, error) {
	if opt.GracePeriod <= 0 {
		opt.GracePeriod = DefaultGracePeriod
	}
	if opt.UploadTTL == 0 {
		opt.UploadTTL = 24 * time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	progress := func(GCResult) {}
	if opt.Progress != nil {
		progress = opt.Progress
	}
	var res GCResult
	cutoff := opt.Now().Add(-opt.GracePeriod)

	// Mark before listing: a blob committed after the mark is recent.
	live := make(map[Digest]struct{})
	if err := m.Live(ctx, cutoff, func(d Digest) error { live[d] = struct{}{}; return nil }); err != nil {
		return res, fmt.Errorf("blob: gc: mark: %w", err)
	}
	res.Live = len(live)
	progress(res)

	// Collect candidates first: deleting while listing is not safe for every backend.
	var candidates []Info
	err := s.List(ctx, func(info Info) error {
		res.Scanned++
		if res.Scanned%ProgressEvery == 0 {
			progress(res)
		}
		if _, ok := live[info.Digest]; ok || !info.Modified.Before(cutoff) {
			return nil
		}
		candidates = append(candidates, info)
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("blob: gc: %w", err)
	}
	res.Candidates = len(candidates)
	for _, c := range candidates {
		cur, err := s.Stat(ctx, c.Digest)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("blob: gc: %w", err)
		}
		if !cur.Modified.Before(cutoff) {
			continue // committed again meanwhile
		}
		if !opt.DryRun {
			removed, err := m.Sweep(ctx, c.Digest, cutoff, func(ctx context.Context) error {
				if err := s.Delete(ctx, c.Digest); err != nil && !errors.Is(err, ErrNotFound) {
					return err
				}
				return nil
			})
			if err != nil {
				return res, fmt.Errorf("blob: gc: sweep: %w", err)
			}
			if !removed {
				continue
			}
		}
		res.Deleted++
		res.FreedBytes += cur.Size
		if opt.Removed != nil {
			opt.Removed(cur)
		}
	}
	progress(res)

	if opt.UploadTTL < 0 {
		return res, nil
	}
	uploadCutoff := opt.Now().Add(-opt.UploadTTL)
	var stale []UploadInfo
	if err := s.Uploads(ctx, func(u UploadInfo) error {
		if u.Updated.Before(uploadCutoff) {
			stale = append(stale, u)
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("blob: gc: %w", err)
	}
	for _, u := range stale {
		if !opt.DryRun {
			if err := s.Abort(ctx, u.ID); err != nil && !errors.Is(err, ErrNotFound) {
				return res, fmt.Errorf("blob: gc: %w", err)
			}
		}
		res.UploadsAborted++
		if opt.Aborted != nil {
			opt.Aborted(u)
		}
	}
	return res, nil
}
