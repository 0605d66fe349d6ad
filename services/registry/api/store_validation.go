package api

import (
	"context"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/jackc/pgx/v5"
)

// listValidationJobs lists jobs newest first, of one state when state is
// not "".
func (s *store) listValidationJobs(ctx context.Context, state string, pg pageReq) ([]registryapi.ValidationJob, error) {
	t, id := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	if pg.after != nil {
		t, id = pg.after.T, pg.after.ID
	}
	rows, err := s.db.Query(ctx, `select j.id::text, r.name, j.manifest_digest, j.listing_id::text, coalesce(l.name, ''),
		j.state, j.attempts, j.max_attempts, j.reasons, j.run_after, j.lease_until, j.created_at, j.updated_at, j.finished_at
		from validation_jobs j join repositories r on r.id = j.repository_id left join listings l on l.id = j.listing_id
		where ($1 = '' or j.state = $1) and (j.created_at, j.id) < ($2, $3::uuid)
		order by j.created_at desc, j.id desc limit $4`, state, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.ValidationJob, error) {
		var j registryapi.ValidationJob
		var reasons []byte
		err := r.Scan(&j.ID, &j.Repository, &j.Digest, &j.ListingID, &j.ListingName, &j.State, &j.Attempts, &j.MaxAttempts,
			&reasons, &j.RunAfter, &j.LeaseUntil, &j.CreatedAt, &j.UpdatedAt, &j.FinishedAt)
		j.Reasons = reasons
		return j, err
	})
}
