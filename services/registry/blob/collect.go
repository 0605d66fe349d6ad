package blob

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// GCOptions tune Collect. The zero value is usable.
type GCOptions struct {
	// GracePeriod keeps blobs committed more recently than this even when
	// unreferenced, covering the window between a Commit and the caller
	// recording a reference to the blob. Default 1 hour.
	GracePeriod time.Duration
	// UploadTTL aborts uploads whose staged data was last written longer
	// ago than this. Default 24 hours; negative: never.
	UploadTTL time.Duration
	// DryRun reports what would be removed without removing it.
	DryRun bool
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// GCResult counts what Collect did.
type GCResult struct {
	Scanned        int   // blobs listed
	Deleted        int   // blobs removed (or, in a dry run, to remove)
	FreedBytes     int64 // their size
	UploadsAborted int   // stale uploads removed
}

// Collect removes every blob that referenced reports unreferenced and that
// was committed longer than GracePeriod ago, and aborts uploads idle for
// longer than UploadTTL. referenced must report a blob as referenced from
// the moment any repository links it (the registry asks PostgreSQL); an
// error from it stops the collection. Before deleting, Collect stats the blob
// again and keeps it if it was re-committed meanwhile.
//
// Collect is the sweep half of mark-and-sweep; the caller must keep
// references from being dropped and re-added to an old blob while it runs
// (for example by running it under an advisory lock that blob-linking
// transactions also take in shared mode).
func Collect(ctx context.Context, s Store, referenced func(context.Context, Digest) (bool, error), opt GCOptions) (GCResult, error) {
	if opt.GracePeriod == 0 {
		opt.GracePeriod = time.Hour
	}
	if opt.UploadTTL == 0 {
		opt.UploadTTL = 24 * time.Hour
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	var res GCResult
	cutoff := opt.Now().Add(-opt.GracePeriod)

	// Collect candidates first: deleting while listing is not safe for every backend.
	var candidates []Info
	err := s.List(ctx, func(info Info) error {
		res.Scanned++
		if !info.Modified.Before(cutoff) {
			return nil
		}
		ok, err := referenced(ctx, info.Digest)
		if err != nil {
			return fmt.Errorf("blob: gc: referenced %s: %w", info.Digest, err)
		}
		if !ok {
			candidates = append(candidates, info)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("blob: gc: %w", err)
	}
	for _, c := range candidates {
		cur, err := s.Stat(ctx, c.Digest)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return res, fmt.Errorf("blob: gc: %w", err)
		}
		if !cur.Modified.Before(cutoff) {
			continue // re-committed meanwhile
		}
		if !opt.DryRun {
			if err := s.Delete(ctx, c.Digest); err != nil && !errors.Is(err, ErrNotFound) {
				return res, fmt.Errorf("blob: gc: %w", err)
			}
		}
		res.Deleted++
		res.FreedBytes += cur.Size
	}

	if opt.UploadTTL < 0 {
		return res, nil
	}
	uploadCutoff := opt.Now().Add(-opt.UploadTTL)
	var stale []string
	if err := s.Uploads(ctx, func(u UploadInfo) error {
		if u.Updated.Before(uploadCutoff) {
			stale = append(stale, u.ID)
		}
		return nil
	}); err != nil {
		return res, fmt.Errorf("blob: gc: %w", err)
	}
	for _, id := range stale {
		if !opt.DryRun {
			if err := s.Abort(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
				return res, fmt.Errorf("blob: gc: %w", err)
			}
		}
		res.UploadsAborted++
	}
	return res, nil
}
