package distribution

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/fpga-faas/faas/services/registry/blob"
)

// orphanGrace is how old staging that no session names must be before a
// sweep removes it: a new upload's staging exists a moment before its
// session does.
const orphanGrace = time.Minute

// Handler is the API's http.Handler. Its SweepUploads is to be run on a
// schedule, and its RenewUploadLeases for as long as it serves, by the
// process serving it.
type Handler struct {
	http.Handler
	s *server
}

// SweepResult counts what SweepUploads removed.
type SweepResult struct {
	Expired    int   // idle sessions ended, with their staging
	Orphans    int   // staged uploads that no session named
	FreedBytes int64 // staged bytes removed
}

// SweepUploads removes what upload sessions leave behind: it ends sessions
// idle for longer than Config.UploadIdleTimeout and removes their staging,
// and removes staging that no session names (left by a crash, or by a
// process killed while a monolithic upload's body arrived) once it is a
// minute old. Uploads this process is writing to are marked active first
// and never touched. Run it at start and then at intervals well within
// UploadIdleTimeout, on every process serving the API: its marking keeps
// other processes' sweeps off the uploads it writes to.
//
// It stops at the first failure of the database or the blob store and
// returns what it did until then.
func (h *Handler) SweepUploads(ctx context.Context) (SweepResult, error) {
	s := h.s
	var res SweepResult
	if err := s.cfg.Meta.TouchUploads(ctx, s.active.ids()); err != nil {
		return res, fmt.Errorf("distribution: sweep: %w", err)
	}
	// Records of bodies a crashed process received no longer count; they
	// are deleted here for tidiness.
	if _, err := s.cfg.Meta.ExpireUploadBodies(ctx); err != nil {
		return res, fmt.Errorf("distribution: sweep: %w", err)
	}
	expired, err := s.cfg.Meta.ExpireUploads(ctx, s.cfg.UploadIdleTimeout)
	if err != nil {
		return res, fmt.Errorf("distribution: sweep: %w", err)
	}
	sizes := map[string]int64{}
	named, err := s.cfg.Meta.StagedKeys(ctx)
	if err != nil {
		return res, fmt.Errorf("distribution: sweep: %w", err)
	}
	cutoff := time.Now().Add(-orphanGrace)
	var orphans []string
	err = s.cfg.Blobs.Uploads(ctx, func(u blob.UploadInfo) error {
		sizes[u.ID] = u.Size
		if !named[u.ID] && !s.active.writes(u.ID) && u.Updated.Before(cutoff) {
			orphans = append(orphans, u.ID)
		}
		return nil
	})
	if err != nil {
		return res, fmt.Errorf("distribution: sweep: %w", err)
	}
	for _, id := range expired {
		if err := abort(ctx, s.cfg.Blobs, id); err != nil {
			return res, err
		}
		res.Expired++
		res.FreedBytes += sizes[id]
	}
	for _, id := range orphans {
		if err := abort(ctx, s.cfg.Blobs, id); err != nil {
			return res, err
		}
		if !slices.Contains(expired, id) {
			res.Orphans++
			res.FreedBytes += sizes[id]
		}
	}
	return res, nil
}

func abort(ctx context.Context, bs blob.Store, id string) error {
	if err := bs.Abort(ctx, id); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("distribution: sweep: %w", err)
	}
	return nil
}
