package api

// The node's side of the accelerator pool's SQL: assignments, grants and
// reports of a node, and the reaper of leases and silent nodes.

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// ownNode checks that p, a node account, owns node id.
func ownNode(ctx context.Context, q querier, p *principal, id string) error {
	if !isUUID(id) {
		return fmt.Errorf("%w: node", ErrNotFound)
	}
	var ok bool
	err := q.QueryRow(ctx, `select exists (select 1 from nodes where id = $1::uuid and account_id = $2::uuid and revoked_at is null)`,
		id, p.ID).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("%w: node", ErrNotFound)
	}
	return err
}

// assignments returns node id's desired state: its live attachments and
// the ended ones it has not released.
func (s *store) assignments(ctx context.Context, p *principal, id string) (poolapi.Assignments, error) {
	out := poolapi.Assignments{Assignments: []poolapi.Assignment{}}
	if err := ownNode(ctx, s.db, p, id); err != nil {
		return out, err
	}
	if err := s.db.QueryRow(ctx, `select coalesce(max(revision), 0) from attachments where node_id = $1::uuid`, id).Scan(&out.Revision); err != nil {
		return out, err
	}
	rows, err := s.db.Query(ctx, `select a.id::text, a.tenant_id::text, t.name, a.repository, a.manifest_digest, a.slot, a.chips,
		a.share, a.credential_hash, a.state from attachments a join accounts t on t.id = a.tenant_id
		where a.node_id = $1::uuid and a.released_at is null order by a.revision`, id)
	if err != nil {
		return out, err
	}
	out.Assignments, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (poolapi.Assignment, error) {
		var a poolapi.Assignment
		var hash []byte
		var st string
		err := r.Scan(&a.ID, &a.TenantID, &a.Tenant, &a.Repository, &a.Digest, &a.Slot, &a.Chips, &a.Share, &hash, &st)
		a.CredentialSHA256, a.State = hex.EncodeToString(hash), poolapi.State(st)
		a.KeepWarm = a.State == poolapi.Detached && !a.Share
		return a, err
	})
	if out.Assignments == nil {
		out.Assignments = []poolapi.Assignment{}
	}
	return out, err
}

// revision returns node id's assignment revision, for long polls.
func (s *store) revision(ctx context.Context, id string) (int64, error) {
	var rev int64
	err := s.db.QueryRow(ctx, `select coalesce(max(revision), 0) from attachments where node_id = $1::uuid`, id).Scan(&rev)
	return rev, err
}

// attachmentGrant issues, for node id (p's), a load grant of live
// attachment aid's image for its tenant: the node loads for the tenant
// without ever holding the tenant's token. A few per attachment (a load
// that is retried), no more.
func (s *store) attachmentGrant(ctx context.Context, p *principal, id, aid string) (registryapi.Grant, error) {
	var g registryapi.Grant
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if err := ownNode(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		if !isUUID(aid) {
			return auditEntry{}, fmt.Errorf("%w: attachment", ErrNotFound)
		}
		var tenant, repo, digest string
		var issued int
		err := tx.QueryRow(ctx, `update attachments set grants_issued = grants_issued + 1
			where id = $1::uuid and node_id = $2::uuid and state = any($3) returning tenant_id::text, repository, manifest_digest, grants_issued`,
			aid, id, liveStates).Scan(&tenant, &repo, &digest, &issued)
		if err != nil {
			return auditEntry{}, noRows(err, "live attachment on this node")
		}
		if issued > maxGrantsPerAttachment {
			return auditEntry{}, fmt.Errorf("%w: attachment %s has had its %d load grants", ErrForbidden, aid, maxGrantsPerAttachment)
		}
		g, err = nodetrust.Issue(ctx, tx, nodetrust.Caller{ID: tenant, Role: "tenant"},
			registryapi.GrantRequest{NodeID: id, Repository: repo, Digest: digest}, 0)
		if err != nil {
			return auditEntry{}, trustErr(err)
		}
		return auditEntry{"attachment.grant", "attachment", aid, map[string]any{"grant_id": g.ID, "node_id": id}}, nil
	})
	return g, err
}

// reportAttachment takes node id's report on attachment aid.
func (s *store) reportAttachment(ctx context.Context, p *principal, id, aid string, r poolapi.StateReport) error {
	if !isUUID(aid) {
		return fmt.Errorf("%w: attachment", ErrNotFound)
	}
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if err := lockRevisions(ctx, tx); err != nil {
			return auditEntry{}, err
		}
		if err := ownNode(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		var st string
		var slot, chips int
		err := tx.QueryRow(ctx, `select state, slot, chips from attachments where id = $1::uuid and node_id = $2::uuid for update`,
			aid, id).Scan(&st, &slot, &chips)
		if err != nil {
			return auditEntry{}, noRows(err, "attachment on this node")
		}
		ae := auditEntry{"attachment." + string(r.State), "attachment", aid, map[string]any{"node_id": id}}
		state := poolapi.State(st)
		switch r.State {
		case poolapi.Loading:
			if state != poolapi.Pending && state != poolapi.Loading {
				return ae, fmt.Errorf("%w: attachment %s is %s", ErrConflict, aid, state)
			}
			_, err = tx.Exec(ctx, `update attachments set state = 'loading', revision = nextval('attachment_revision') where id = $1::uuid`, aid)
		case poolapi.Ready: // again after a restart of the node, which installs the credential anew
			if !state.Live() {
				return ae, fmt.Errorf("%w: attachment %s is %s", ErrConflict, aid, state)
			}
			if len(r.Slots) != chips || !slices.Contains(r.Slots, slot) {
				return ae, fieldErr("slots", "want the %d slot(s) from %d the attachment was placed on", chips, slot)
			}
			ae.details["slots"] = r.Slots
			_, err = tx.Exec(ctx, `update attachments set state = 'ready', ready_at = coalesce(ready_at, now()),
				revision = nextval('attachment_revision') where id = $1::uuid`, aid)
		case poolapi.Failed:
			if len(r.Error) > 1024 {
				r.Error = r.Error[:1024]
			}
			ae.details["error"] = r.Error
			var ok bool
			if ok, err = end(ctx, tx, aid, "", poolapi.Failed, r.Error); err == nil && !ok {
				return ae, fmt.Errorf("%w: attachment %s is %s", ErrConflict, aid, state)
			}
		case poolapi.Released:
			if state.Live() {
				return ae, fmt.Errorf("%w: attachment %s is %s, not ended", ErrConflict, aid, state)
			}
			ae.details["scrubbed"] = r.Scrubbed
			_, err = tx.Exec(ctx, `update attachments set released_at = coalesce(released_at, now()), scrubbed = $2,
				revision = nextval('attachment_revision') where id = $1::uuid`, aid, r.Scrubbed)
		default:
			return ae, fieldErr("state", "want loading, ready, failed or released")
		}
		if err != nil {
			return ae, err
		}
		return ae, notify(ctx, tx)
	})
}

// reap ends live attachments whose lease ran out (expired) or whose node
// stopped heartbeating or was revoked (lost), closing their usage records
// and auditing each as the registry. Replicas may reap at once: each row
// is ended by one update.
func (s *store) reap(ctx context.Context, cfg AttachConfig) (int, error) {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	// Nothing to reap is the common case: look without the lock first.
	var due bool
	if err := tx.QueryRow(ctx, `select exists (select 1 from attachments a join nodes n on n.id = a.node_id where a.state = any($1)
		and (a.lease_expires_at < now() or n.revoked_at is not null or n.last_heartbeat_at is null
			or n.last_heartbeat_at < now() - $2::interval))`, liveStates, interval(cfg.NodeLostAfter)).Scan(&due); err != nil || !due {
		return 0, err
	}
	if err := lockRevisions(ctx, tx); err != nil {
		return 0, err
	}
	rows, err := tx.Query(ctx, `update attachments a set state = case when a.lease_expires_at < now() then 'expired' else 'lost' end,
		ended_at = now(), revision = nextval('attachment_revision')
		from nodes n where n.id = a.node_id and a.state = any($1)
		and (a.lease_expires_at < now() or n.revoked_at is not null or n.last_heartbeat_at is null
			or n.last_heartbeat_at < now() - $2::interval)
		returning a.id::text, a.state, a.node_id::text, a.tenant_id::text`, liveStates, interval(cfg.NodeLostAfter))
	if err != nil {
		return 0, err
	}
	type ended struct{ id, state, node, tenant string }
	var es []ended
	for rows.Next() {
		var e ended
		if err := rows.Scan(&e.id, &e.state, &e.node, &e.tenant); err != nil {
			rows.Close()
			return 0, err
		}
		es = append(es, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(es) == 0 {
		return 0, err
	}
	for _, e := range es {
		if _, err := tx.Exec(ctx, `update usage_records set ended_at = now() where attachment_id = $1::uuid and ended_at is null`, e.id); err != nil {
			return 0, err
		}
		dj, _ := json.Marshal(map[string]any{"node_id": e.node, "tenant_id": e.tenant})
		if _, err := tx.Exec(ctx, `insert into audit_log (actor_name, action, target_type, target_id, details)
			values ('registry', $1, 'attachment', $2, $3)`, "attachment."+e.state, e.id, dj); err != nil {
			return 0, err
		}
	}
	if err := notify(ctx, tx); err != nil {
		return 0, err
	}
	return len(es), tx.Commit(ctx)
}
