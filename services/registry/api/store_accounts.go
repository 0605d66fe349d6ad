package api

import (
	"context"
	"fmt"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/jackc/pgx/v5"
)

func (s *store) createAccount(ctx context.Context, p *principal, name string, role auth.Role, password string) (registryapi.Account, error) {
	var hash *string
	if password != "" {
		h, err := s.accounts.HashPassword(ctx, password)
		if err != nil {
			return registryapi.Account{}, err
		}
		hash = &h
	}
	var a registryapi.Account
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		err := tx.QueryRow(ctx, `insert into accounts (name, role, password_hash) values ($1, $2, $3)
			returning id::text, name, role, disabled, created_at`, name, string(role), hash).
			Scan(&a.ID, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt)
		return auditEntry{"account.create", "account", a.ID, map[string]any{"name": name, "role": role}}, err
	})
	return a, err
}

func (s *store) listAccounts(ctx context.Context, pg pageReq, role string) ([]registryapi.Account, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, `select id::text, name, role, disabled, created_at from accounts
		where ($1 = '' or role = $1) and (created_at, id) > ($2, $3::uuid)
		order by created_at, id limit $4`, role, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Account, error) {
		var a registryapi.Account
		return a, r.Scan(&a.ID, &a.Name, &a.Role, &a.Disabled, &a.CreatedAt)
	})
}

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
