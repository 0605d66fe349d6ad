package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

const listingCols = `l.id::text, l.owner_id::text, a.name, coalesce(r.name, ''), l.name, l.summary, l.description,
	l.category, l.board_model, l.currency, coalesce(cp.per_hour_micros, 0), coalesce(cp.per_load_micros, 0),
	coalesce(cp.per_attached_hour_micros, 0), l.visibility, l.trial_hours,
	l.published, exists (select 1 from listing_versions v join validation_jobs j
		on j.repository_id = l.repository_id and j.manifest_digest = v.manifest_digest
		where v.listing_id = l.id and j.state = 'available'),
	coalesce((select g.digest from listing_logos g where g.listing_id = l.id), ''), l.created_at, l.updated_at`

const listingFrom = ` from listings l join accounts a on a.id = l.owner_id left join repositories r on r.id = l.repository_id ` +
	currentPrices

// visibleTo is the predicate "listing l is visible to the caller"; $1 is
// the caller's id (” for anonymous), $2 whether the caller is an admin.
const visibleTo = `($2 or (l.published and l.visibility = 'public') or l.owner_id::text = $1
	or exists (select 1 from entitlements e where e.listing_id = l.id and e.account_id::text = $1
	           and e.revoked_at is null and (e.expires_at is null or e.expires_at > now())))`

func scanListing(r pgx.Row) (registryapi.Listing, error) {
	var l registryapi.Listing
	return l, r.Scan(&l.ID, &l.OwnerID, &l.Owner, &l.Repository, &l.Name, &l.Summary, &l.Description,
		&l.Category, &l.BoardModel, &l.Currency, &l.PricePerHourMicros, &l.PricePerLoadMicros, &l.PricePerAttachedHourMicros, &l.Visibility, &l.TrialHours,
		&l.Published, &l.Validated, &l.LogoDigest, &l.CreatedAt, &l.UpdatedAt)
}

func who(p *principal) (string, bool) {
	if p == nil {
		return "", false
	}
	return p.ID, p.Role == auth.RoleAdmin
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func (s *store) createListing(ctx context.Context, p *principal, repo string, f registryapi.ListingFields) (registryapi.Listing, error) {
	var l registryapi.Listing
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		var repoID int64
		var owner *string
		err := tx.QueryRow(ctx, `insert into repositories (name, owner_id) values ($1, $2::uuid)
			on conflict (name) do update set owner_id = coalesce(repositories.owner_id, excluded.owner_id)
			returning id, owner_id::text`, repo, p.ID).Scan(&repoID, &owner)
		if err != nil {
			return auditEntry{}, err
		}
		if owner == nil || *owner != p.ID {
			return auditEntry{}, fieldErr("repository", "belongs to another account")
		}
		cur, cat := "USD", "other"
		if f.Category != nil && *f.Category != "" {
			cat = *f.Category
		}
		if f.Currency != nil {
			cur = *f.Currency
		}
		vis := "private"
		if f.Visibility != nil {
			vis = *f.Visibility
		}
		var id string
		err = tx.QueryRow(ctx, `insert into listings (owner_id, repository_id, name, summary, description, category,
			board_model, currency, visibility, trial_hours)
			values ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, coalesce($10, 0)) returning id::text`,
			p.ID, repoID, str(f.Name), str(f.Summary), str(f.Description), cat, str(f.BoardModel),
			cur, vis, f.TrialHours).Scan(&id)
		if err != nil {
			return auditEntry{}, err
		}
		if _, err := setPrice(ctx, tx, p, id, newPrice(f), false); err != nil {
			return auditEntry{}, err
		}
		l, err = scanListing(tx.QueryRow(ctx, `select `+listingCols+listingFrom+` where l.id = $1::uuid`, id))
		return auditEntry{"listing.create", "listing", id, map[string]any{"name": l.Name, "repository": repo}}, err
	})
	if errors.Is(err, ErrConflict) {
		return l, fmt.Errorf("%w: a listing of that name or for that repository exists", ErrConflict)
	}
	return l, err
}

// newPrice is the price change that a listing's fields ask for, effective
// now.
func newPrice(f registryapi.ListingFields) registryapi.NewPrice {
	return registryapi.NewPrice{PerLoadMicros: f.PricePerLoadMicros, PerHourMicros: f.PricePerHourMicros,
		PerAttachedHourMicros: f.PricePerAttachedHourMicros}
}

type listingFilter struct {
	category, board, owner, q string
	published                 *bool
}

func (s *store) listListings(ctx context.Context, p *principal, f listingFilter, pg pageReq) ([]registryapi.Listing, error) {
	me, admin := who(p)
	t, id := after(pg)
	rows, err := s.db.Query(ctx, `select `+listingCols+listingFrom+` where `+visibleTo+`
		and ($3 = '' or l.category = lower(btrim($3))) and ($4 = '' or l.board_model = $4) and ($5 = '' or a.name = $5)
		and ($6 = '' or l.name ilike '%' || $6 || '%' or l.summary ilike '%' || $6 || '%')
		and ($7::boolean is null or l.published = $7)
		and (l.created_at, l.id) > ($8, $9::uuid)
		order by l.created_at, l.id limit $10`,
		me, admin, f.category, f.board, f.owner, escapeLike(f.q), f.published, t, id, pg.limit+1)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Listing, error) { return scanListing(r) })
}

func escapeLike(q string) string {
	out := make([]rune, 0, len(q))
	for _, c := range q {
		if c == '%' || c == '_' || c == '\\' {
			out = append(out, '\\')
		}
		out = append(out, c)
	}
	return string(out)
}

// getListing returns listing id if the caller may see it, else ErrNotFound.
func (s *store) getListing(ctx context.Context, q querier, p *principal, id string) (registryapi.Listing, error) {
	if !isUUID(id) {
		return registryapi.Listing{}, fmt.Errorf("%w: listing", ErrNotFound)
	}
	me, admin := who(p)
	l, err := scanListing(q.QueryRow(ctx, `select `+listingCols+listingFrom+` where l.id = $3::uuid and `+visibleTo,
		me, admin, id))
	return l, noRows(err, "listing")
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// owns reports whether p manages listing l: its owner, or an admin.
func owns(p *principal, l registryapi.Listing) bool {
	return p.is(auth.RoleAdmin) || p != nil && l.OwnerID == p.ID
}

// notYours is the one answer to anyone but a listing's owner (and admins)
// who asks to manage it, whether or not the listing is visible to them:
// a published listing of another ISV is as absent from the management
// routes (here and the portal's /isv pages) as a private one, so that the
// answer never tells one from the other.
func notYours() error { return fmt.Errorf("%w: no such listing of yours", ErrNotFound) }

// managedListing returns listing id to its owner or an admin, and
// notYours to anyone else, whether the listing is visible to them, hidden
// or missing.
func (s *store) managedListing(ctx context.Context, q querier, p *principal, id string) (registryapi.Listing, error) {
	l, err := s.getListing(ctx, q, p, id)
	if errors.Is(err, ErrNotFound) || err == nil && !owns(p, l) {
		return l, notYours()
	}
	return l, err
}

// ownListing returns listing id for a change by the caller, else
// notYours. The row is locked for the transaction.
func (s *store) ownListing(ctx context.Context, tx pgx.Tx, p *principal, id string) (registryapi.Listing, error) {
	l, err := s.managedListing(ctx, tx, p, id)
	if err != nil {
		return l, err
	}
	if _, err := tx.Exec(ctx, `select 1 from listings where id = $1::uuid for update`, id); err != nil {
		return l, err
	}
	return l, nil
}

func (s *store) updateListing(ctx context.Context, p *principal, id string, f registryapi.ListingFields) (registryapi.Listing, error) {
	var l registryapi.Listing
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		if err := currencyFixed(ctx, tx, id, f.Currency); err != nil {
			return auditEntry{}, err
		}
		if err := trialFixed(ctx, tx, id, f.TrialHours); err != nil {
			return auditEntry{}, err
		}
		_, err := tx.Exec(ctx, `update listings set
			name = coalesce($2, name), summary = coalesce($3, summary), description = coalesce($4, description),
			category = coalesce($5, category), board_model = coalesce($6, board_model), currency = coalesce($7, currency),
			visibility = coalesce($8, visibility), trial_hours = coalesce($9, trial_hours), updated_at = now() where id = $1::uuid`,
			id, f.Name, f.Summary, f.Description, f.Category, f.BoardModel, f.Currency, f.Visibility, f.TrialHours)
		if err != nil {
			return auditEntry{}, err
		}
		if _, err := setPrice(ctx, tx, p, id, newPrice(f), true); err != nil {
			return auditEntry{}, err
		}
		l, err = scanListing(tx.QueryRow(ctx, `select `+listingCols+listingFrom+` where l.id = $1::uuid`, id))
		return auditEntry{"listing.update", "listing", id, map[string]any{"fields": f}}, err
	})
	return l, err
}

func (s *store) setPublished(ctx context.Context, p *principal, id string, pub bool) (registryapi.Listing, error) {
	var l registryapi.Listing
	action := "listing.unpublish"
	if pub {
		action = "listing.publish"
	}
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		if _, err := tx.Exec(ctx, `update listings set published = $2, updated_at = now() where id = $1::uuid`, id, pub); err != nil {
			return auditEntry{}, err
		}
		var err error
		l, err = scanListing(tx.QueryRow(ctx, `select `+listingCols+listingFrom+` where l.id = $1::uuid`, id))
		return auditEntry{action, "listing", id, nil}, err
	})
	return l, err
}

// Versions -----------------------------------------------------------------------

const versionSel = `select v.version, v.manifest_digest, coalesce(j.state, 'pending'), coalesce(j.reasons, '[]'::jsonb),
	coalesce(j.attempts, 0), v.created_at, j.finished_at,
	(select count(*) from usage_records u where u.listing_id = v.listing_id and u.manifest_digest = v.manifest_digest
	 and u.event = 'load' and u.recorded_at > now() - interval '30 days')
	from listing_versions v join listings l on l.id = v.listing_id
	left join validation_jobs j on j.repository_id = l.repository_id and j.manifest_digest = v.manifest_digest `

func scanVersion(r pgx.Row) (registryapi.Version, error) {
	var v registryapi.Version
	var reasons []byte
	err := r.Scan(&v.Version, &v.ManifestDigest, &v.State, &reasons, &v.Attempts, &v.CreatedAt, &v.ValidatedAt, &v.Loads30d)
	v.Reasons = reasons
	return v, err
}

func (s *store) addVersion(ctx context.Context, p *principal, listingID, version, digest string) (registryapi.Version, error) {
	var v registryapi.Version
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		l, err := s.ownListing(ctx, tx, p, listingID)
		if err != nil {
			return auditEntry{}, err
		}
		if l.Repository == "" {
			return auditEntry{}, fmt.Errorf("%w: the listing has no repository", ErrConflict)
		}
		m, err := s.meta.GetManifest(ctx, l.Repository, digest)
		if err != nil {
			if isMetaNotFound(err) {
				return auditEntry{}, fieldErr("digest", "no such manifest in repository %s", l.Repository)
			}
			return auditEntry{}, err
		}
		// A version names its tag's image for good (meta, "Immutable
		// tags"): one whose tag names another image would load that image
		// under the version's name.
		tagged, err := meta.LockTag(ctx, tx, l.Repository, version)
		if err != nil {
			return auditEntry{}, err
		}
		if tagged != "" && tagged != m.Digest {
			return auditEntry{}, fmt.Errorf("%w: tag %s of %s names %s, not %s: a version names the image its tag names; push the image under a new tag and add it as that version",
				ErrConflict, version, l.Repository, tagged, m.Digest)
		}
		if _, err := tx.Exec(ctx, `insert into listing_versions (listing_id, version, manifest_digest) values ($1::uuid, $2, $3)`,
			listingID, version, m.Digest); err != nil {
			if errors.Is(pgErr(err), ErrConflict) {
				return auditEntry{}, fmt.Errorf("%w: version %q exists", ErrConflict, version)
			}
			return auditEntry{}, err
		}
		// The durable validation job of this image (item 5 runs it).
		if _, err := tx.Exec(ctx, `insert into validation_jobs (repository_id, manifest_digest, listing_id)
			select repository_id, $2, id from listings where id = $1::uuid
			on conflict (repository_id, manifest_digest) do update
			set listing_id = coalesce(validation_jobs.listing_id, excluded.listing_id)`, listingID, m.Digest); err != nil {
			return auditEntry{}, err
		}
		v, err = scanVersion(tx.QueryRow(ctx, versionSel+` where v.listing_id = $1::uuid and v.version = $2`, listingID, version))
		return auditEntry{"listing.version.create", "listing", listingID, map[string]any{"version": version, "digest": m.Digest}}, err
	})
	return v, err
}

func (s *store) listVersions(ctx context.Context, p *principal, listingID string, pg pageReq) ([]registryapi.Version, error) {
	if _, err := s.getListing(ctx, s.db, p, listingID); err != nil {
		return nil, err
	}
	// An anonymous visitor sees what can be loaded, not the findings of
	// validations that failed or have yet to end.
	anonymous := p == nil
	t, _ := after(pg)
	rows, err := s.db.Query(ctx, versionSel+` where v.listing_id = $1::uuid and (v.created_at, v.version) > ($2, $3)
		and (not $5 or coalesce(j.state, 'pending') = 'available')
		order by v.created_at, v.version limit $4`, listingID, t, afterVersion(pg), pg.limit+1, anonymous)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.Version, error) {
		v, err := scanVersion(r)
		if anonymous {
			v.Reasons, v.Attempts = json.RawMessage("[]"), 0
		}
		return v, err
	})
}

func afterVersion(pg pageReq) string {
	if pg.after == nil {
		return ""
	}
	return pg.after.ID
}
