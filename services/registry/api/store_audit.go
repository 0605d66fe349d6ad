package api

import (
	"context"
	"strconv"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/jackc/pgx/v5"
)

// Audit ---------------------------------------------------------------------------

// auditFilter selects audit entries; "" matches all.
type auditFilter struct {
	action, targetType, targetID string
	actor                        string // account name of the actor
}

// listAudit returns entries newest first: all for admins; for an isv those
// about its listings or signing keys and those of its own actions. The
// cursor's ID is the last entry id.
func (s *store) listAudit(ctx context.Context, p *principal, f auditFilter, pg pageReq) ([]registryapi.AuditEntry, error) {
	var before int64 = 1<<63 - 1
	if pg.after != nil {
		n, err := strconv.ParseInt(pg.after.ID, 10, 64)
		if err != nil {
			return nil, fieldErr("cursor", "malformed")
		}
		before = n
	}
	rows, err := s.db.Query(ctx, `select id, at, actor_id::text, actor_name, action, target_type, target_id, outcome,
		request_id, remote_addr, details from audit_log
		where ($1 or actor_id = $2::uuid
			or (target_type = 'listing' and target_id in (select id::text from listings where owner_id = $2::uuid))
			or (target_type = 'signing_key' and target_id in (select id::text from signing_keys where account_id = $2::uuid)))
		and ($3 = '' or action = $3) and ($4 = '' or target_type = $4) and ($5 = '' or target_id = $5)
		and ($8 = '' or actor_name = $8)
		and id < $6 order by id desc limit $7`,
		p.is(auth.RoleAdmin), p.ID, f.action, f.targetType, f.targetID, before, pg.limit+1, f.actor)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanAuditEntry)
}

// scanAuditEntry reads a row of audit_log's columns id, at, actor_id,
// actor_name, action, target_type, target_id, outcome, request_id,
// remote_addr, details, in that order.
func scanAuditEntry(r pgx.CollectableRow) (registryapi.AuditEntry, error) {
	var e registryapi.AuditEntry
	var d []byte
	err := r.Scan(&e.ID, &e.At, &e.ActorID, &e.ActorName, &e.Action, &e.TargetType, &e.TargetID, &e.Outcome,
		&e.RequestID, &e.RemoteAddr, &d)
	e.Details = d
	return e, err
}
