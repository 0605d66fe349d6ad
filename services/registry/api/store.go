package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// store holds the API's SQL. Every mutation runs in tx, which writes the
// audit row in the same transaction.
type store struct {
	db       *pgxpool.Pool
	meta     *meta.Store
	accounts *auth.Store
	// catalogIdx is the snapshot catalog searches look at; changes to
	// listings drop it.
	catalogIdx *catalogIndex
}

// auditEntry describes the change a mutation makes.
type auditEntry struct {
	action     string
	targetType string
	targetID   string
	details    map[string]any
}

// tx runs fn in a transaction and, when fn succeeds, appends the audit row
// it describes before committing.
func (s *store) tx(ctx context.Context, p *principal, fn func(pgx.Tx) (auditEntry, error)) error {
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("api: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	ae, err := fn(tx)
	if err != nil {
		return pgErr(err)
	}
	details := ae.details
	if details == nil {
		details = map[string]any{}
	}
	dj, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("api: audit details: %w", err)
	}
	_, err = tx.Exec(ctx, `insert into audit_log (actor_id, actor_name, action, target_type, target_id, request_id, remote_addr, details)
		values (nullif($1, '')::uuid, $2, $3, $4, $5, $6, $7, $8)`, // no account: an operator at the command line
		p.ID, p.Name, ae.action, ae.targetType, ae.targetID, p.requestID, p.remote, dj)
	if err != nil {
		return fmt.Errorf("api: audit: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return pgErr(fmt.Errorf("api: commit: %w", err))
	}
	if ae.targetType == "listing" {
		s.catalogIdx.changed()
	}
	return nil
}

// auditDenied records a refused mutation (outcome "denied: why") outside
// the refused transaction. The refusal stands even when the record cannot
// be written.
func (s *store) auditDenied(ctx context.Context, p *principal, ae auditEntry, why string) {
	dj, err := json.Marshal(ae.details)
	if err != nil {
		return
	}
	_, _ = s.db.Exec(context.WithoutCancel(ctx), `insert into audit_log (actor_id, actor_name, action, target_type, target_id,
		outcome, request_id, remote_addr, details) values ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9)`,
		p.ID, p.Name, ae.action, ae.targetType, ae.targetID, "denied: "+why, p.requestID, p.remote, dj)
}

// pgErr maps constraint violations to user errors and faults of the
// database to meta.ErrUnavailable; other errors pass.
func pgErr(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return meta.Unavailable(err)
	}
	switch pe.Code {
	case "23505":
		return fmt.Errorf("%w: already exists", ErrConflict)
	case "23503":
		return fmt.Errorf("%w: a referenced object does not exist", ErrInvalid)
	case "23514", "22P02", "22001":
		return fmt.Errorf("%w: a value is out of range or malformed", ErrInvalid)
	}
	return meta.Unavailable(err)
}

func noRows(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return err
}

// after returns the keyset start of a page (the minimum when none).
func after(pg pageReq) (time.Time, string) {
	if pg.after == nil {
		return time.Unix(0, 0).UTC().AddDate(-100, 0, 0), "00000000-0000-0000-0000-000000000000"
	}
	return pg.after.T, pg.after.ID
}
