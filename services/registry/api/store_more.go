package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

var uuidRE = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

func isUUID(s string) bool { return uuidRE.MatchString(s) }

func isMetaNotFound(err error) bool { return errors.Is(err, meta.ErrNotFound) }

// Entitlements --------------------------------------------------------------------

// Entitlement grants an account access to a listing.
type Entitlement struct {
	ID          string     `json:"id"`
	ListingID   string     `json:"listing_id"`
	ListingName string     `json:"listing_name"`
	AccountID   string     `json:"account_id"`
	Account     string     `json:"account"`
	Kind        string     `json:"kind"`
	GrantedBy   *string    `json:"granted_by,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

const entSel = `select e.id::text, e.listing_id::text, l.name, e.account_id::text, a.name, e.kind, e.granted_by::text,
	e.created_at, e.expires_at, e.revoked_at
	from entitlements e join listings l on l.id = e.listing_id join accounts a on a.id = e.account_id `

func scanEnt(r pgx.Row) (Entitlement, error) {
	var e Entitlement
	return e, r.Scan(&e.ID, &e.ListingID, &e.ListingName, &e.AccountID, &e.Account, &e.Kind, &e.GrantedBy,
		&e.CreatedAt, &e.ExpiresAt, &e.RevokedAt)
}

// grant gives account the entitlement kind to listing l; an active one of
// the same kind is returned as is (created false).
func (s *store) grant(ctx context.Context, tx pgx.Tx, p *principal, l Listing, accountID, kind string) (Entitlement, bool, error) {
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
		return Entitlement{}, false, err
	}
	e, err := scanEnt(tx.QueryRow(ctx, entSel+` where e.id = $1::uuid`, id))
	return e, created, err
}

func (s *store) subscribe(ctx context.Context, p *principal, listingID string) (Entitlement, bool, error) {
	var e Entitlement
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
		return auditEntry{"entitlement.subscribe", "listing", l.ID, map[string]any{"entitlement": e.ID, "created": created}}, err
	})
	return e, created, err
}

func (s *store) share(ctx context.Context, p *principal, listingID, account string) (Entitlement, bool, error) {
	var e Entitlement
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
func (s *store) listEntitlements(ctx context.Context, p *principal, f entFilter, pg pageReq) ([]Entitlement, error) {
	t, id := after(pg)
	rows, err := s.pool.Query(ctx, entSel+` where ($1 or e.account_id = $2::uuid or ($3 and l.owner_id = $2::uuid))
		and ($4 = '' or e.listing_id::text = $4) and (not $5 or e.revoked_at is null)
		and (e.created_at, e.id) > ($6, $7::uuid) order by e.created_at, e.id limit $8`,
		p.is(auth.RoleAdmin), p.ID, p.is(auth.RoleISV), f.listing, f.active, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (Entitlement, error) { return scanEnt(r) })
}

func (s *store) revokeEntitlement(ctx context.Context, p *principal, id string) (Entitlement, error) {
	var e Entitlement
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

// Usage ---------------------------------------------------------------------------

// UsageRecord is one record of a node's usage report.
type UsageRecord struct {
	ReportID       string     `json:"report_id"`
	TenantID       string     `json:"tenant_id"`
	ListingID      *string    `json:"listing_id,omitempty"`
	ManifestDigest *string    `json:"digest,omitempty"`
	Board          string     `json:"board,omitempty"`
	Slot           *int       `json:"slot,omitempty"`
	Event          string     `json:"event"`
	BusyNs         int64      `json:"busy_ns,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
}

// recordUsage stores the records of node nodeID (owned by p); records whose
// report id the node sent before are skipped. It returns how many were new.
func (s *store) recordUsage(ctx context.Context, p *principal, nodeID string, recs []UsageRecord) (int, error) {
	n := 0
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var ok bool
		if err := tx.QueryRow(ctx, `select exists (select 1 from nodes where id = $1::uuid and account_id = $2::uuid and revoked_at is null)`,
			nodeID, p.ID).Scan(&ok); err != nil {
			return auditEntry{}, err
		}
		if !ok {
			return auditEntry{}, fmt.Errorf("%w: node", ErrNotFound)
		}
		for i, r := range recs {
			tag, err := tx.Exec(ctx, `insert into usage_records (node_id, tenant_id, listing_id, manifest_digest, board, slot,
				event, busy_ns, started_at, ended_at, report_id)
				select $1::uuid, a.id,
					-- A node knows the image it loaded, not the listing: the
					-- listing is the oldest one whose versions include it.
					coalesce($3::uuid, (select v.listing_id from listing_versions v
						where v.manifest_digest = $4 order by v.created_at limit 1)),
					$4, $5, $6, $7, $8, $9, $10, $11 from accounts a
				where a.id = $2::uuid and a.role = 'tenant'
				on conflict (node_id, report_id) do nothing`,
				nodeID, r.TenantID, r.ListingID, r.ManifestDigest, r.Board, r.Slot, r.Event, r.BusyNs, r.StartedAt, r.EndedAt, r.ReportID)
			if err != nil {
				if errors.Is(pgErr(err), ErrInvalid) {
					return auditEntry{}, fieldErr("records["+strconv.Itoa(i)+"]", "refers to an unknown listing or has a bad value")
				}
				return auditEntry{}, err
			}
			if tag.RowsAffected() == 0 {
				var dup bool
				if err := tx.QueryRow(ctx, `select exists (select 1 from usage_records where node_id = $1::uuid and report_id = $2)`,
					nodeID, r.ReportID).Scan(&dup); err != nil {
					return auditEntry{}, err
				}
				if !dup {
					return auditEntry{}, fieldErr("records["+strconv.Itoa(i)+"].tenant_id", "no such tenant")
				}
				continue
			}
			n++
		}
		return auditEntry{"usage.report", "node", nodeID, map[string]any{"records": len(recs), "new": n}}, nil
	})
	return n, err
}

// UsageSummary is the usage of one tenant on one listing with its cost.
type UsageSummary struct {
	ListingID          string `json:"listing_id"`
	ListingName        string `json:"listing_name"`
	TenantID           string `json:"tenant_id"`
	Tenant             string `json:"tenant"`
	Currency           string `json:"currency"`
	Loads              int64  `json:"loads"`
	Clears             int64  `json:"clears"`
	BusyNs             int64  `json:"busy_ns"`
	PricePerHourMicros int64  `json:"price_per_hour_micros"`
	PricePerLoadMicros int64  `json:"price_per_load_micros"`
	LoadCostMicros     int64  `json:"load_cost_micros"`
	TimeCostMicros     int64  `json:"time_cost_micros"`
	TotalMicros        int64  `json:"total_micros"`
}

// usageSummary: admin all, isv its listings, tenant its own usage; times
// [from, to). Costs use the listing's current prices; time is rounded to
// the nearest micro.
func (s *store) usageSummary(ctx context.Context, p *principal, from, to *time.Time, listing string) ([]UsageSummary, error) {
	rows, err := s.pool.Query(ctx, `select l.id::text, l.name, a.id::text, a.name, l.currency,
		count(*) filter (where u.event = 'load'), count(*) filter (where u.event = 'clear'),
		coalesce(sum(u.busy_ns), 0)::bigint, l.price_per_hour_micros, l.price_per_load_micros,
		(count(*) filter (where u.event = 'load') * l.price_per_load_micros)::bigint,
		round(coalesce(sum(u.busy_ns), 0)::numeric * l.price_per_hour_micros / 3600000000000)::bigint
		from usage_records u join listings l on l.id = u.listing_id join accounts a on a.id = u.tenant_id
		where ($1 or ($2 and l.owner_id = $3::uuid) or ($4 and u.tenant_id = $3::uuid))
		and ($5::timestamptz is null or u.recorded_at >= $5) and ($6::timestamptz is null or u.recorded_at < $6)
		and ($7 = '' or l.id::text = $7)
		group by l.id, a.id order by l.name, l.id, a.name`,
		p.is(auth.RoleAdmin), p.is(auth.RoleISV), p.ID, p.is(auth.RoleTenant), from, to, listing)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (UsageSummary, error) {
		var u UsageSummary
		err := r.Scan(&u.ListingID, &u.ListingName, &u.TenantID, &u.Tenant, &u.Currency, &u.Loads, &u.Clears, &u.BusyNs,
			&u.PricePerHourMicros, &u.PricePerLoadMicros, &u.LoadCostMicros, &u.TimeCostMicros)
		u.TotalMicros = u.LoadCostMicros + u.TimeCostMicros
		return u, err
	})
}

// Audit ---------------------------------------------------------------------------

// AuditEntry is a row of the audit log.
type AuditEntry struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	ActorID    *string         `json:"actor_id,omitempty"`
	ActorName  string          `json:"actor"`
	Action     string          `json:"action"`
	TargetType string          `json:"target_type"`
	TargetID   string          `json:"target_id"`
	Outcome    string          `json:"outcome"`
	RequestID  string          `json:"request_id"`
	RemoteAddr string          `json:"remote_addr"`
	Details    json.RawMessage `json:"details"`
}

// listAudit returns entries newest first: all for admins, for an isv those
// about its listings. The cursor's ID is the last entry id.
func (s *store) listAudit(ctx context.Context, p *principal, action, targetType, targetID string, pg pageReq) ([]AuditEntry, error) {
	var before int64 = 1<<63 - 1
	if pg.after != nil {
		n, err := strconv.ParseInt(pg.after.ID, 10, 64)
		if err != nil {
			return nil, fieldErr("cursor", "malformed")
		}
		before = n
	}
	rows, err := s.pool.Query(ctx, `select id, at, actor_id::text, actor_name, action, target_type, target_id, outcome,
		request_id, remote_addr, details from audit_log
		where ($1 or (target_type = 'listing' and target_id in (select id::text from listings where owner_id = $2::uuid)))
		and ($3 = '' or action = $3) and ($4 = '' or target_type = $4) and ($5 = '' or target_id = $5)
		and id < $6 order by id desc limit $7`,
		p.is(auth.RoleAdmin), p.ID, action, targetType, targetID, before, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (AuditEntry, error) {
		var e AuditEntry
		var d []byte
		err := r.Scan(&e.ID, &e.At, &e.ActorID, &e.ActorName, &e.Action, &e.TargetType, &e.TargetID, &e.Outcome,
			&e.RequestID, &e.RemoteAddr, &d)
		e.Details = d
		return e, err
	})
}
