package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Nodes ---------------------------------------------------------------------------

// Node is a registered node agent.
type Node struct {
	ID              string          `json:"id"`
	AccountID       string          `json:"account_id"`
	Hostname        string          `json:"hostname"`
	PublicKey       string          `json:"public_key"`
	Boards          json.RawMessage `json:"boards"`
	RegisteredAt    time.Time       `json:"registered_at"`
	LastHeartbeatAt *time.Time      `json:"last_heartbeat_at,omitempty"`
	RevokedAt       *time.Time      `json:"revoked_at,omitempty"`
}

const nodeCols = `id::text, account_id::text, name, public_key, boards, registered_at, last_heartbeat_at, revoked_at`

func scanNode(r pgx.Row) (Node, error) {
	var n Node
	var b []byte
	err := r.Scan(&n.ID, &n.AccountID, &n.Hostname, &n.PublicKey, &b, &n.RegisteredAt, &n.LastHeartbeatAt, &n.RevokedAt)
	n.Boards = b
	return n, err
}

func (s *store) registerNode(ctx context.Context, p *principal, hostname, pubPEM string) (Node, error) {
	var n Node
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var err error
		n, err = scanNode(tx.QueryRow(ctx, `insert into nodes (account_id, name, public_key) values ($1::uuid, $2, $3)
			returning `+nodeCols, p.ID, hostname, pubPEM))
		return auditEntry{"node.register", "node", n.ID, map[string]any{"hostname": hostname}}, err
	})
	if errors.Is(err, ErrConflict) {
		return n, fmt.Errorf("%w: a node named %q exists", ErrConflict, hostname)
	}
	return n, err
}

func (s *store) heartbeat(ctx context.Context, p *principal, id string, boards []byte) (Node, error) {
	var n Node
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if !isUUID(id) {
			return auditEntry{}, fmt.Errorf("%w: node", ErrNotFound)
		}
		var err error
		n, err = scanNode(tx.QueryRow(ctx, `update nodes set boards = $3, last_heartbeat_at = now()
			where id = $1::uuid and account_id = $2::uuid and revoked_at is null returning `+nodeCols, id, p.ID, boards))
		return auditEntry{"node.heartbeat", "node", id, nil}, noRows(err, "node")
	})
	return n, err
}

func (s *store) listNodes(ctx context.Context, pg pageReq) ([]Node, error) {
	t, id := after(pg)
	rows, err := s.pool.Query(ctx, `select `+nodeCols+` from nodes where (registered_at, id) > ($1, $2::uuid)
		order by registered_at, id limit $3`, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) { return scanNode(r) })
}
