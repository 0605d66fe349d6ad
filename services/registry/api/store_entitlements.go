package api

import (
	"context"
	"errors"
	"fmt"
	"regexp"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func isUUID(s string) bool { return uuidRE.MatchString(s) }

func isMetaNotFound(err error) bool { return errors.Is(err, meta.ErrNotFound) }

// Entitlements --------------------------------------------------------------------

const entSel = `select e.id::text, e.listing_id::text, l.name, e.account_id::text, a.name, e.kind, e.granted_by::text,
	e.created_at, e.expires_at, e.revoked_at
	from entitlements e join listings l on l.id = e.listing_id join accounts a on a.id = e.account_id `

func scanEnt(r pgx.Row) (registryapi.Entitlement, error) {
	var e registryapi.Entitlement
	return e, r.Scan(&e.ID, &e.ListingID, &e.ListingName, &e.AccountID, &e.Account, &e.Kind, &e.GrantedBy,
		&e.CreatedAt, &e.ExpiresAt, &e.RevokedAt)
}

// grant gives account the entitlement kind to listing l; an active one of
// the same kind is returned as is (created false).
func (s *store) grant(ctx context.Context, tx pgx.Tx, p *principal, l registryapi.Listing, accountID, kind string) (registryapi.Entitlement, bool, error) {
	var id string
	err := tx.QueryRow(ctx, `insert into entitlements (listing_id, account_id, kind, granted_by)
		values ($1::uuid, $2::uuid, $3, $4::uuid)
		on conflict (listing_id, account_id, kind) where revoked_at is null do nothing returning id::text`,
		l.ID, accountID, kind, p.ID).Scan(&id)
	created := true
	if errors.Is(err, pgx.ErrNoRows) {
		created = false
		err = tx.QueryRow(ctx, `select id::text from entitlements where listing_id = $1::uuid and account_id = $2::uuid
			and kind = $3 and revoked_at is null`, l.ID, accountID, kind).Scan(&id)
	}
	if err != nil {
		return registryapi.Entitlement{}, false, err
	}
	e, err := scanEnt(tx.QueryRow(ctx, entSel+` where e.id = $1::uuid`, id))
	return e, created, err
}

func (s *store) subscribe(ctx context.Context, p *principal, listingID string) (registryapi.Entitlement, bool, error) {
	var e registryapi.Entitlement
	var created bool
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		l, err := s.getListing(ctx, tx, p, listingID)
		if err != nil {
			return auditEntry{}, err
		}
		if !l.Published || l.Visibility != "public" {
			return auditEntry{}, fmt.Errorf("%w: only published public listings take subscriptions", ErrForbidden)
		}
		e, created, err = s.grant(ctx, tx, p, l, p.ID, "subscription")
		if err == nil && created {
			err = emit(ctx, tx, l.OwnerID, registryapi.EventSubscriptionCreated, map[string]any{"entitlement_id": e.ID,
				"listing_id": l.ID, "listing_name": l.Name, "tenant_id": p.ID, "tenant": p.Name})
		}
		return auditEntry{"entitlement.subscribe", "listing", l.ID, map[string]any{"entitlement": e.ID, "created": created}}, err
	})
	return e, created, err
}

func (s *store) share(ctx context.Context, p *principal, listingID, account string) (registryapi.Entitlement, bool, error) {
	var e registryapi.Entitlement
	var created bool
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		l, err := s.ownListing(ctx, tx, p, listingID)
		if err != nil {
			return auditEntry{}, err
		}
		var accID, role string
		err = tx.QueryRow(ctx, `select id::text, role from accounts where name = $1 and not disabled`, account).Scan(&accID, &role)
		if errors.Is(err, pgx.ErrNoRows) {
			return auditEntry{}, fieldErr("account", "no such account")
		}
		if err != nil {
			return auditEntry{}, err
		}
		if accID == l.OwnerID || role == string(auth.RoleAdmin) || role == string(auth.RoleNode) {
			return auditEntry{}, fieldErr("account", "cannot share with the owner, an admin or a node")
		}
		e, created, err = s.grant(ctx, tx, p, l, accID, "share")
		return auditEntry{"entitlement.share", "listing", l.ID, map[string]any{"entitlement": e.ID, "account": account, "created": created}}, err
	})
	return e, created, err
}

type entFilter struct {
	listing string
	active  bool
}

// listEntitlements: admin all; isv its own and those to its listings;
// others their own.
func (s *store) listEntitlements(ctx context.Context, p *principal, f entFilter, pg pageReq) ([]registryapi.Entitlement, error) {
	t, id := after(pg)
	rows, err := s.db.Query(ctx, entSel+` where ($1 or e.account_id = $2::uuid or ($3 and l.owner_id = $2::uuid))
		and ($4 = '' or e.listing_id::text = $4) and (not $5 or e.revoked_at is null)
		and (e.created_at, e.id) > ($6, $7::uuid) order by e.created_at, e.id limit $8`,
		p.is(auth.RoleAdmin), p.ID, p.is(auth.RoleISV), f.listing, f.active, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Entitlement, error) { return scanEnt(r) })
}

func (s *store) revokeEntitlement(ctx context.Context, p *principal, id string) (registryapi.Entitlement, error) {
	var e registryapi.Entitlement
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if !isUUID(id) {
			return auditEntry{}, fmt.Errorf("%w: entitlement", ErrNotFound)
		}
		var err error
		e, err = scanEnt(tx.QueryRow(ctx, `with u as (update entitlements e set revoked_at = coalesce(e.revoked_at, now())
			from listings l where l.id = e.listing_id and e.id = $1::uuid
			  and ($2 or e.account_id = $3::uuid or l.owner_id = $3::uuid) returning e.*)
			select e.id::text, e.listing_id::text, l.name, e.account_id::text, a.name, e.kind, e.granted_by::text,
			e.created_at, e.expires_at, e.revoked_at
			from u e join listings l on l.id = e.listing_id join accounts a on a.id = e.account_id`,
			id, p.is(auth.RoleAdmin), p.ID))
		return auditEntry{"entitlement.revoke", "listing", e.ListingID, map[string]any{"entitlement": id}}, noRows(err, "entitlement")
	})
	return e, err
}
