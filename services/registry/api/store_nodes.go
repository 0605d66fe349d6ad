package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// Nodes ---------------------------------------------------------------------------

const nodeCols = `id::text, account_id::text, name, public_key, boards, registered_at, last_heartbeat_at,
	approved_at, approved_by, revoked_at, endpoint, tls_certificate`

func scanNode(r pgx.Row) (registryapi.Node, error) {
	var n registryapi.Node
	var b []byte
	err := r.Scan(&n.ID, &n.AccountID, &n.Hostname, &n.PublicKey, &b, &n.RegisteredAt, &n.LastHeartbeatAt,
		&n.ApprovedAt, &n.ApprovedBy, &n.RevokedAt, &n.Endpoint, &n.TLSCertificate)
	n.Boards = b
	n.ServerName = poolapi.ServerName(n.ID)
	return n, err
}

// registerNode registers a node of p; with an enrollment token it is
// approved at once, else it waits for an operator.
func (s *store) registerNode(ctx context.Context, p *principal, hostname, pubPEM, enrollment string) (registryapi.Node, error) {
	var n registryapi.Node
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		n, err = scanNode(tx.QueryRow(ctx, `insert into nodes (account_id, name, public_key) values ($1::uuid, $2, $3)
			returning `+nodeCols, p.ID, hostname, pubPEM))
		if err != nil || enrollment == "" {
			return auditEntry{"node.register", "node", n.ID, map[string]any{"hostname": hostname}}, err
		}
		if err := nodetrust.Enroll(ctx, tx, enrollment, n.ID); err != nil {
			if errors.Is(err, nodetrust.ErrInvalid) {
				return auditEntry{}, fieldErr("enrollment_token", "unknown, used or expired")
			}
			return auditEntry{}, err
		}
		n, err = scanNode(tx.QueryRow(ctx, `select `+nodeCols+` from nodes where id = $1::uuid`, n.ID))
		return auditEntry{"node.register", "node", n.ID, map[string]any{"hostname": hostname, "approved_by": n.ApprovedBy}}, err
	})
	if errors.Is(err, ErrConflict) {
		return n, fmt.Errorf("%w: a node named %q exists", ErrConflict, hostname)
	}
	return n, err
}

// heartbeat records a heartbeat of node id. A certificate (canonical PEM,
// "" for none) is pinned when none is, and replaces the pinned one when it
// has the same public key (a renewal); one with another key refuses the
// whole heartbeat, so a node whose key changed shows as silent until an
// admin repins it rather than quietly serving a certificate tenants refuse.
func (s *store) heartbeat(ctx context.Context, p *principal, id string, boards []byte, endpoint, cert string) (registryapi.Node, error) {
	var n registryapi.Node
	var refused error
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if !isUUID(id) {
			return auditEntry{}, fmt.Errorf("%w: node", ErrNotFound)
		}
		if cert != "" {
			var pinned string
			err := tx.QueryRow(ctx, `select tls_certificate from nodes where id = $1::uuid and account_id = $2::uuid
				and revoked_at is null for update`, id, p.ID).Scan(&pinned)
			if err != nil {
				return auditEntry{}, noRows(err, "node")
			}
			if pinned != "" && keyFingerprint(pinned) != keyFingerprint(cert) {
				refused = fieldErr("tls_certificate", "its key differs from the key pinned for this node (SHA-256 %s); if the node's key changed on purpose, an admin clears the pin with `registry nodes repin %s` (POST /api/v1/nodes/%s/repin)", keyFingerprint(pinned), id, id)
				return auditEntry{}, refused
			}
		}
		var err error
		n, err = scanNode(tx.QueryRow(ctx, `update nodes set boards = $3, last_heartbeat_at = now(),
			endpoint = case when $5 = '' then endpoint else $4 end,
			tls_certificate = case when $5 = '' then tls_certificate else $5 end
			where id = $1::uuid and account_id = $2::uuid and revoked_at is null returning `+nodeCols, id, p.ID, boards, endpoint, cert))
		return auditEntry{"node.heartbeat", "node", id, nil}, noRows(err, "node")
	})
	if refused != nil {
		s.auditDenied(ctx, p, auditEntry{"node.certificate_refused", "node", id, map[string]any{"key_sha256": keyFingerprint(cert)}}, "certificate key differs from the pin")
	}
	return n, err
}

// repinNode clears node id's pinned certificate as p, an admin; the next
// certificate the node reports is pinned.
func (s *store) repinNode(ctx context.Context, p *principal, id string) (registryapi.Node, error) {
	var n registryapi.Node
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		old, err := nodetrust.Repin(ctx, tx, id)
		if err != nil {
			return auditEntry{}, trustErr(err)
		}
		n, err = scanNode(tx.QueryRow(ctx, `select `+nodeCols+` from nodes where id = $1::uuid`, id))
		return auditEntry{"node.repin", "node", id, map[string]any{"hostname": n.Hostname, "cleared_key_sha256": keyFingerprint(old)}}, err
	})
	return n, err
}

func (s *store) listNodes(ctx context.Context, pg pageReq) ([]registryapi.Node, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, `select `+nodeCols+` from nodes where (registered_at, id) > ($1, $2::uuid)
		order by registered_at, id limit $3`, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Node, error) { return scanNode(r) })
}

// setNodeTrust approves (approve true) or revokes node id as p, an admin.
func (s *store) setNodeTrust(ctx context.Context, p *principal, id string, approve bool) (registryapi.Node, error) {
	var n registryapi.Node
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		action, f := "node.revoke", nodetrust.Revoke
		if approve {
			action, f = "node.approve", nodetrust.Approve
		}
		if err := f(ctx, tx, id, p.Name); err != nil {
			return auditEntry{}, trustErr(err)
		}
		var err error
		n, err = scanNode(tx.QueryRow(ctx, `select `+nodeCols+` from nodes where id = $1::uuid`, id))
		return auditEntry{action, "node", id, map[string]any{"hostname": n.Hostname}}, err
	})
	return n, err
}

// createEnrollment makes a one-time node enrollment token as p, an admin.
func (s *store) createEnrollment(ctx context.Context, p *principal, ttl time.Duration) (registryapi.Enrollment, error) {
	var e registryapi.Enrollment
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		e, err = nodetrust.CreateEnrollment(ctx, tx, p.Name, ttl)
		if err != nil {
			return auditEntry{}, trustErr(err)
		}
		return auditEntry{"node.enrollment.create", "enrollment", e.ID, map[string]any{"expires_at": e.ExpiresAt}}, nil
	})
	return e, err
}

// issueGrant issues a load grant as p for req.
func (s *store) issueGrant(ctx context.Context, p *principal, req registryapi.GrantRequest) (registryapi.Grant, error) {
	var g registryapi.Grant
	var spend spendState
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		g, err = nodetrust.Issue(ctx, tx, nodetrust.Caller{ID: p.ID, Role: string(p.Role)}, req, 0)
		if err != nil {
			return auditEntry{}, trustErr(err)
		}
		if g.ListingID != nil {
			var cur string
			if err := tx.QueryRow(ctx, `select currency from listings where id = $1::uuid`, *g.ListingID).Scan(&cur); err != nil {
				return auditEntry{}, err
			}
			if spend, err = spendGate(ctx, tx, p, cur); err != nil {
				return auditEntry{}, err
			}
		}
		return auditEntry{"grant.issue", "image", req.Repository + "@" + req.Digest,
			map[string]any{"grant_id": g.ID, "node_id": req.NodeID, "expires_at": g.ExpiresAt}}, nil
	})
	if errors.Is(err, ErrSpendLimit) {
		s.auditDenied(ctx, p, auditEntry{"grant.issue", "image", req.Repository + "@" + req.Digest,
			map[string]any{"node_id": req.NodeID, "currency": spend.Currency}}, "spend limit reached")
	}
	if aerr := s.spendAlert(ctx, spend); aerr != nil && err == nil {
		return g, aerr
	}
	return g, err
}

// trustErr maps package nodetrust's categories to the API's.
func trustErr(err error) error {
	switch {
	case errors.Is(err, nodetrust.ErrNotFound):
		return fmt.Errorf("%w: node", ErrNotFound)
	case errors.Is(err, nodetrust.ErrPermission):
		return fmt.Errorf("%w: %v", ErrForbidden, err)
	case errors.Is(err, nodetrust.ErrNotApproved), errors.Is(err, nodetrust.ErrRevoked):
		return fmt.Errorf("%w: %v", ErrNodeUntrusted, err)
	case errors.Is(err, nodetrust.ErrInvalid):
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return err
}

// listLoads returns the slots whose last heartbeat shows an image that the
// caller loaded. Heartbeats name a slot's image but not its tenant; the
// tenant comes from the node's load usage records, which the registry took
// only under a grant of that tenant for that node and image. A slot counts
// when its latest load record is the caller's and names the digest the
// heartbeat shows.
func (s *store) listLoads(ctx context.Context, p *principal) ([]registryapi.Load, error) {
	rows, err := s.db.Query(ctx, `with mine as (
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
