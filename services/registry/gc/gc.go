// Package gc is the registry's garbage collection: a mark and sweep of the
// blob store against the metadata in PostgreSQL (package meta), run by
// `registry gc` and on a schedule by `registry serve`.
//
// The mark is every blob a manifest references (config and layers, in any
// repository) plus every blob linked into a repository, recorded or held
// within the grace period; the sweep removes every other blob whose bytes
// are older than the grace period, with its repository links, and aborts
// uploads idle for longer than the upload TTL. One collection runs at a time
// (a PostgreSQL advisory lock; [meta.ErrGCBusy] otherwise), and it is safe
// while the registry serves pushes: see meta.GC and meta.Store.HoldBlob for
// how a blob committed, mounted or referenced by a manifest during the
// collection is kept.
//
// Manifests are never removed, tagged or not: images are pinned by digest
// (listing versions, validation jobs, signatures and other referrers), so
// an untagged manifest is not garbage here, unlike with distribution's
// --delete-untagged. Delete a manifest through the API to let its blobs go.
package gc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Options tune Run. The zero value is usable.
type Options struct {
	// GracePeriod spares blobs committed, linked or held more recently; it
	// must exceed the longest push, from its first blob to its manifest.
	// Default blob.DefaultGracePeriod (2 hours).
	GracePeriod time.Duration
	// UploadTTL aborts uploads whose staged data is older. Default 24
	// hours; negative: never.
	UploadTTL time.Duration
	// DryRun reports what would be removed and removes nothing.
	DryRun bool
	// Logger receives progress. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Report is what a collection did, or in a dry run would do.
type Report struct {
	DryRun      bool    `json:"dry_run"`
	GracePeriod string  `json:"grace_period"`
	Live        int     `json:"live_blobs"`    // blobs the mark found live
	Scanned     int     `json:"scanned_blobs"` // blobs in the store
	Blobs       []Blob  `json:"removed_blobs"`
	FreedBytes  int64   `json:"freed_bytes"`
	Uploads     []Stale `json:"aborted_uploads"`
	HoldsPurged int64   `json:"holds_purged"` // expired commit holds deleted
}

// Blob is a removed blob.
type Blob struct {
	Digest string `json:"digest"`
	Size   int64  `json:"size"`
}

// Stale is an aborted upload.
type Stale struct {
	ID   string `json:"id"`
	Size int64  `json:"size"`
}

// Run collects garbage once. It fails with an error wrapping
// meta.ErrGCBusy when another collection is running. On any other error
// the report holds what was done before it.
func Run(ctx context.Context, m *meta.Store, s blob.Store, opt Options) (Report, error) {
	if opt.GracePeriod <= 0 {
		opt.GracePeriod = blob.DefaultGracePeriod
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	now := opt.Now()
	cutoff := now.Add(-opt.GracePeriod)
	rep := Report{DryRun: opt.DryRun, GracePeriod: opt.GracePeriod.String(), Blobs: []Blob{}, Uploads: []Stale{}}

	g, err := m.BeginGC(ctx)
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	defer g.Close()
	verb := "removed"
	if opt.DryRun {
		verb = "would remove"
	}
	log.InfoContext(ctx, "gc: marking", slog.Bool("dry_run", opt.DryRun), slog.Time("cutoff", cutoff))
	marked := false
	res, err := blob.Collect(ctx, s, marker{g}, blob.GCOptions{
		GracePeriod: opt.GracePeriod,
		UploadTTL:   opt.UploadTTL,
		DryRun:      opt.DryRun,
		Now:         func() time.Time { return now },
		Removed: func(i blob.Info) {
			rep.Blobs = append(rep.Blobs, Blob{string(i.Digest), i.Size})
			log.InfoContext(ctx, "gc: "+verb+" blob", slog.String("digest", string(i.Digest)), slog.Int64("size", i.Size))
		},
		Aborted: func(u blob.UploadInfo) {
			rep.Uploads = append(rep.Uploads, Stale{u.ID, u.Size})
			log.InfoContext(ctx, "gc: "+verb+" upload", slog.String("id", u.ID), slog.Int64("size", u.Size))
		},
		Progress: func(r blob.GCResult) {
			if !marked {
				marked = true
				log.InfoContext(ctx, "gc: marked", slog.Int("live_blobs", r.Live))
				return
			}
			log.InfoContext(ctx, "gc: sweeping", slog.Int("scanned_blobs", r.Scanned), slog.Int("candidates", r.Candidates),
				slog.Int("removed_blobs", r.Deleted))
		},
	})
	rep.Live, rep.Scanned, rep.FreedBytes = res.Live, res.Scanned, res.FreedBytes
	if err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	if !opt.DryRun {
		if rep.HoldsPurged, err = g.PurgeHolds(ctx, cutoff); err != nil {
			return rep, fmt.Errorf("gc: %w", err)
		}
	}
	if err := g.Close(); err != nil {
		return rep, fmt.Errorf("gc: %w", err)
	}
	log.InfoContext(ctx, "gc: done", slog.Int("scanned_blobs", rep.Scanned), slog.Int("live_blobs", rep.Live),
		slog.Int("removed_blobs", len(rep.Blobs)), slog.Int64("freed_bytes", rep.FreedBytes),
		slog.Int("aborted_uploads", len(rep.Uploads)), slog.Bool("dry_run", opt.DryRun))
	return rep, nil
}

// marker is meta.GC as a blob.Marker.
type marker struct{ g *meta.GC }

func (m marker) Live(ctx context.Context, cutoff time.Time, fn func(blob.Digest) error) error {
	return m.g.Live(ctx, cutoff, func(d string) error { return fn(blob.Digest(d)) })
}

func (m marker) Sweep(ctx context.Context, d blob.Digest, cutoff time.Time, remove func(context.Context) error) (bool, error) {
	return m.g.Sweep(ctx, string(d), cutoff, remove)
}
