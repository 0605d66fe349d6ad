package api

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// Usage ---------------------------------------------------------------------------

// recordUsage stores the records of node nodeID (owned by p); records whose
// report id the node sent before are skipped. It returns how many were new.
// Every new record must name a load grant given to this node for its tenant
// (nodetrust.UsageGrant); the listing and digest come from the grant, not
// from the node. A batch with one record that does not match is refused
// whole, and the refusal is audited.
func (s *store) recordUsage(ctx context.Context, p *principal, nodeID string, recs []registryapi.UsageRecord) (int, error) {
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
			field := func(f string) string { return "records[" + strconv.Itoa(i) + "]" + f }
			var dup bool
			if err := tx.QueryRow(ctx, `select exists (select 1 from usage_records where node_id = $1::uuid and report_id = $2)`,
				nodeID, r.ReportID).Scan(&dup); err != nil {
				return auditEntry{}, err
			}
			if dup {
				continue
			}
			g, err := nodetrust.UsageGrant(ctx, tx, nodeID, r.TenantID, r.GrantID, r.Event)
			if errors.Is(err, nodetrust.ErrPermission) {
				return auditEntry{}, fieldErr(field(".grant_id"), "matches no load grant given to this node for this tenant, or backs no more loads")
			}
			if err != nil {
				return auditEntry{}, err
			}
			switch {
			case r.ManifestDigest != nil && *r.ManifestDigest != g.Digest:
				return auditEntry{}, fieldErr(field(".digest"), "is not the image of the grant")
			case r.ListingID != nil && (g.ListingID == nil || *r.ListingID != *g.ListingID):
				return auditEntry{}, fieldErr(field(".listing_id"), "is not the listing of the grant")
			}
			_, err = tx.Exec(ctx, `insert into usage_records (node_id, tenant_id, listing_id, manifest_digest, board, slot,
				event, busy_ns, started_at, ended_at, report_id, grant_id)
				values ($1::uuid, $2::uuid, $3::uuid, $4, $5, $6, $7, $8, $9, $10, $11, $12::uuid)`,
				nodeID, g.TenantID, g.ListingID, g.Digest, r.Board, r.Slot, r.Event, r.BusyNs, r.StartedAt, r.EndedAt, r.ReportID, g.ID)
			if err != nil {
				if errors.Is(pgErr(err), ErrInvalid) {
					return auditEntry{}, fieldErr(field(""), "has a bad value")
				}
				return auditEntry{}, err
			}
			n++
		}
		return auditEntry{"usage.report", "node", nodeID, map[string]any{"records": len(recs), "new": n}}, nil
	})
	var fe *FieldError
	if errors.As(err, &fe) {
		s.auditDenied(ctx, p, auditEntry{"usage.report", "node", nodeID, map[string]any{"records": len(recs), "field": fe.Field}}, fe.Msg)
	}
	if err != nil {
		return n, err
	}
	// The tenants' spend grew: their alerts are due now, not at their next
	// load. A failure here fails the report, which the node sends again
	// (its records are then skipped, and the alerts checked again).
	seen := map[string]bool{}
	for _, r := range recs {
		if !seen[r.TenantID] && isUUID(r.TenantID) {
			seen[r.TenantID] = true
			if err := s.spendAlerts(ctx, r.TenantID); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// usageSummary: admin all, isv its listings, tenant its own usage;
// records made in [from, to), per listing and tenant, and per day of
// recording (UTC) when perDay. Each record is priced at the prices in force
// when it was used (pricedUsage); a line's time costs are rounded down to
// the micro-unit once, after summing. The price fields are the listing's
// prices now, for reference.
func (s *store) usageSummary(ctx context.Context, p *principal, from, to *time.Time, listing string, perDay bool) ([]registryapi.UsageSummary, error) {
	rows, err := s.db.Query(ctx, pricedUsage(allTime)+`select case when $8 then to_char(u.recorded_at at time zone 'UTC', 'YYYY-MM-DD') else '' end as day,
		l.id::text, l.name, a.id::text, a.name, l.currency,
		count(*) filter (where u.event = 'load'), count(*) filter (where u.event = 'clear'),
		coalesce(sum(u.busy_ns), 0)::bigint, count(*) filter (where u.event = 'attach'),
		coalesce(sum(u.ns_in) filter (where u.event = 'attach'), 0)::bigint,
		coalesce(cp.per_hour_micros, 0), coalesce(cp.per_load_micros, 0), coalesce(cp.per_attached_hour_micros, 0),
		coalesce(sum(u.load_micros), 0)::bigint,
		floor(coalesce(sum(u.time_value) filter (where u.event = 'busy'), 0) / `+nsPerHour+`)::bigint,
		floor(coalesce(sum(u.time_value) filter (where u.event = 'attach'), 0) / `+nsPerHour+`)::bigint
		from priced u join listings l on l.id = u.listing_id join accounts a on a.id = u.tenant_id `+currentPrices+`
		where ($1 or ($2 and l.owner_id = $3::uuid) or ($4 and u.tenant_id = $3::uuid))
		and ($5::timestamptz is null or u.recorded_at >= $5) and ($6::timestamptz is null or u.recorded_at < $6)
		and ($7 = '' or l.id::text = $7)
		group by day, l.id, a.id, cp.per_hour_micros, cp.per_load_micros, cp.per_attached_hour_micros
		order by day, l.name, l.id, a.name`,
		p.is(auth.RoleAdmin), p.is(auth.RoleISV), p.ID, p.is(auth.RoleTenant), from, to, listing, perDay)
	if err != nil {
		return nil, fmt.Errorf("api: usage summary: %w", err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.UsageSummary, error) {
		var u registryapi.UsageSummary
		err := r.Scan(&u.Day, &u.ListingID, &u.ListingName, &u.TenantID, &u.Tenant, &u.Currency, &u.Loads, &u.Clears, &u.BusyNs,
			&u.Attachments, &u.AttachedNs, &u.PricePerHourMicros, &u.PricePerLoadMicros, &u.PricePerAttachedHourMicros,
			&u.LoadCostMicros, &u.TimeCostMicros, &u.AttachedCostMicros)
		u.TotalMicros = u.LoadCostMicros + u.TimeCostMicros + u.AttachedCostMicros
		return u, err
	})
}
