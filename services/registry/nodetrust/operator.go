package nodetrust

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Node is a registered node as an operator sees it.
type Node struct {
	ID              string     `json:"id"`
	Hostname        string     `json:"hostname"`
	Account         string     `json:"account"`
	RegisteredAt    time.Time  `json:"registered_at"`
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at,omitempty"`
	ApprovedAt      *time.Time `json:"approved_at,omitempty"`
	ApprovedBy      string     `json:"approved_by,omitempty"`
	RevokedAt       *time.Time `json:"revoked_at,omitempty"`
	// Endpoint is where the node serves remote attach ("" for none), and
	// Attachments how many live attachments of the pool it holds.
	Endpoint    string `json:"endpoint"`
	Attachments int    `json:"attachments"`
}

// State is "revoked", "approved" or "pending".
func (n Node) State() string {
	switch {
	case n.RevokedAt != nil:
		return "revoked"
	case n.ApprovedAt != nil:
		return "approved"
	}
	return "pending"
}

// Querier is what listing needs of the database.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// List returns every node, oldest first (at most 10 000).
func List(ctx context.Context, q Querier) ([]Node, error) {
	rows, err := q.Query(ctx, `select n.id::text, n.name, a.name, n.registered_at, n.last_heartbeat_at,
		n.approved_at, n.approved_by, n.revoked_at, n.endpoint,
		(select count(*) from attachments t where t.node_id = n.id and t.state in ('pending', 'loading', 'ready'))
		from nodes n join accounts a on a.id = n.account_id
		order by n.registered_at, n.id limit 10000`)
	if err != nil {
		return nil, fmt.Errorf("nodetrust: nodes: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Node, error) {
		var n Node
		err := r.Scan(&n.ID, &n.Hostname, &n.Account, &n.RegisteredAt, &n.LastHeartbeatAt, &n.ApprovedAt, &n.ApprovedBy, &n.RevokedAt,
			&n.Endpoint, &n.Attachments)
		return n, err
	})
}

// Resolve returns the id of the node named by ref: its id or its host name.
func Resolve(ctx context.Context, q DBTX, ref string) (string, error) {
	var id string
	err := q.QueryRow(ctx, `select id::text from nodes where id::text = $1 or name = $1`, ref).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("%w: node %q", ErrNotFound, ref)
	}
	if err != nil {
		return "", fmt.Errorf("nodetrust: node: %w", err)
	}
	return id, nil
}

// Audit records an operator's action taken outside the API (the registry
// command), as the API records its own.
func Audit(ctx context.Context, q DBTX, actor, action, targetType, targetID string, details map[string]any) error {
	if details == nil {
		details = map[string]any{}
	}
	d, err := json.Marshal(details)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `insert into audit_log (actor_name, action, target_type, target_id, details)
		values ($1, $2, $3, $4, $5)`, actor, action, targetType, targetID, d)
	if err != nil {
		return fmt.Errorf("nodetrust: audit: %w", err)
	}
	return nil
}
