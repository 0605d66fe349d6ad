package api

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// Operations: account changes, the validation queue and a caller's loads.

// updateAccount changes account id's role or disabled flag as p, an admin.
// An admin cannot change or disable its own account (no lock-out by a
// slip), node accounts keep their role and no account becomes a node (a
// node account's nodes and a person's listings would change meaning), and
// an ISV that owns listings or repositories stays an ISV.
func (s *store) updateAccount(ctx context.Context, p *principal, id string, ch registryapi.AccountUpdate) (registryapi.Account, error) {
	var a registryapi.Account
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if !isUUID(id) {
			return auditEntry{}, fmt.Errorf("%w: account", ErrNotFound)
		}
		err := tx.QueryRow(ctx, `select id::text, name, role, disabled, created_at from accounts where id = $1::uuid for update`, id).
			Scan(&a.ID, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt)
		if err != nil {
			return auditEntry{}, noRows(err, "account")
		}
		if a.ID == p.ID {
			return auditEntry{}, fmt.Errorf("%w: you cannot change your own account; ask another admin", ErrForbidden)
		}
		details := map[string]any{"name": a.Name}
		if ch.Role != nil && *ch.Role != a.Role {
			if a.Role == string(auth.RoleNode) || *ch.Role == string(auth.RoleNode) {
				return auditEntry{}, fieldErr("role", "node accounts keep their role, and no account becomes a node")
			}
			if a.Role == string(auth.RoleISV) {
				var owns bool
				if err := tx.QueryRow(ctx, `select exists (select 1 from listings where owner_id = $1::uuid)
					or exists (select 1 from repositories where owner_id = $1::uuid)`, a.ID).Scan(&owns); err != nil {
					return auditEntry{}, err
				}
				if owns {
					return auditEntry{}, fmt.Errorf("%w: %s owns listings or repositories and stays an isv", ErrConflict, a.Name)
				}
			}
			details["role"] = map[string]string{"from": a.Role, "to": *ch.Role}
			a.Role = *ch.Role
		}
		if ch.Disabled != nil && *ch.Disabled != a.Disabled {
			details["disabled"] = *ch.Disabled
			a.Disabled = *ch.Disabled
		}
		_, err = tx.Exec(ctx, `update accounts set role = $2, disabled = $3, updated_at = now() where id = $1::uuid`,
			a.ID, a.Role, a.Disabled)
		return auditEntry{"account.update", "account", a.ID, details}, err
	})
	return a, err
}

// listValidationJobs lists jobs newest first, of one state when state is
// not "".
func (s *store) listValidationJobs(ctx context.Context, state string, pg pageReq) ([]registryapi.ValidationJob, error) {
	t, id := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "ffffffff-ffff-ffff-ffff-ffffffffffff"
	if pg.after != nil {
		t, id = pg.after.T, pg.after.ID
	}
	rows, err := s.pool.Query(ctx, `select j.id::text, r.name, j.manifest_digest, j.listing_id::text, coalesce(l.name, ''),
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

// listLoads returns the slots whose last heartbeat shows an image that the
// caller loaded. Heartbeats name a slot's image but not its tenant; the
// tenant comes from the node's load usage records, which the registry took
// only under a grant of that tenant for that node and image. A slot counts
// when its latest load record is the caller's and names the digest the
// heartbeat shows.
func (s *store) listLoads(ctx context.Context, p *principal) ([]registryapi.Load, error) {
	rows, err := s.pool.Query(ctx, `with mine as (
			select u.id, u.node_id, u.slot, u.manifest_digest, u.listing_id, coalesce(u.started_at, u.recorded_at) as at
			from usage_records u
			where u.tenant_id = $1::uuid and u.event = 'load' and u.slot is not null
			and not exists (select 1 from usage_records v where v.node_id = u.node_id and v.slot = u.slot
				and v.event = 'load' and v.id > u.id)
		), slots as (
			select n.id as node_id, n.name, n.last_heartbeat_at, b.value->>'model' as model, s.value as slot
			from nodes n
			cross join lateral jsonb_array_elements(case jsonb_typeof(n.boards) when 'array' then n.boards else '[]' end) b
			cross join lateral jsonb_array_elements(case jsonb_typeof(b.value->'slots') when 'array' then b.value->'slots' else '[]' end) s
			where n.revoked_at is null and n.id in (select node_id from mine)
		)
		select s.node_id::text, s.name, coalesce(s.model, ''), m.slot, s.slot->>'state', m.manifest_digest,
			m.listing_id::text, coalesce(l.name, ''), m.at, s.last_heartbeat_at
		from slots s join mine m on m.node_id = s.node_id and m.slot::text = s.slot->>'index'
		left join listings l on l.id = m.listing_id
		where s.slot->>'state' in ('loading', 'loaded', 'busy') and s.slot->>'digest' = m.manifest_digest
		order by s.name, m.slot limit 1000`, p.ID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Load, error) {
		var l registryapi.Load
		return l, r.Scan(&l.NodeID, &l.Hostname, &l.Board, &l.Slot, &l.State, &l.Digest, &l.ListingID, &l.ListingName,
			&l.LoadedAt, &l.LastHeartbeatAt)
	})
}
