package api

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// setLogo stores lg as listing id's logo, replacing any, for its owner or
// an admin.
func (s *store) setLogo(ctx context.Context, p *principal, id string, lg logo) (registryapi.Listing, error) {
	var l registryapi.Listing
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		if _, err := tx.Exec(ctx, `insert into listing_logos (listing_id, png, digest, width, height) values ($1::uuid, $2, $3, $4, $5)
			on conflict (listing_id) do update set png = excluded.png, digest = excluded.digest, width = excluded.width,
			height = excluded.height, updated_at = now()`, id, lg.png, lg.digest, lg.width, lg.height); err != nil {
			return auditEntry{}, err
		}
		if _, err := tx.Exec(ctx, `update listings set updated_at = now() where id = $1::uuid`, id); err != nil {
			return auditEntry{}, err
		}
		var err error
		l, err = scanListing(tx.QueryRow(ctx, `select `+listingCols+listingFrom+` where l.id = $1::uuid`, id))
		return auditEntry{"listing.logo.set", "listing", id, map[string]any{"digest": lg.digest, "bytes": len(lg.png),
			"width": lg.width, "height": lg.height}}, err
	})
	return l, err
}

// deleteLogo removes listing id's logo; a listing without one answers
// ErrNotFound.
func (s *store) deleteLogo(ctx context.Context, p *principal, id string) error {
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		tag, err := tx.Exec(ctx, `delete from listing_logos where listing_id = $1::uuid`, id)
		if err != nil {
			return auditEntry{}, err
		}
		if tag.RowsAffected() == 0 {
			return auditEntry{}, fmt.Errorf("%w: the listing has no logo", ErrNotFound)
		}
		_, err = tx.Exec(ctx, `update listings set updated_at = now() where id = $1::uuid`, id)
		return auditEntry{"listing.logo.delete", "listing", id, nil}, err
	})
}

// getLogo returns the logo of listing id, to whoever may see the listing
// (anonymous callers: a published public one); ErrNotFound otherwise, and
// for a listing without a logo. public: anyone may see it.
func (s *store) getLogo(ctx context.Context, p *principal, id string) (lg logo, public bool, err error) {
	l, err := s.getListing(ctx, s.db, p, id)
	if err != nil {
		return logo{}, false, err
	}
	public = l.Published && l.Visibility == "public"

	err = s.db.QueryRow(ctx, `select png, digest, width, height from listing_logos where listing_id = $1::uuid`, id).
		Scan(&lg.png, &lg.digest, &lg.width, &lg.height)
	if errors.Is(err, pgx.ErrNoRows) {
		return lg, false, fmt.Errorf("%w: the listing has no logo", ErrNotFound)
	}
	return lg, public, err
}

// setDocs sets the documentation of a version of listing id, for its
// owner or an admin.
func (s *store) setDocs(ctx context.Context, p *principal, id, version, markdown string) (registryapi.VersionDocs, error) {
	d := registryapi.VersionDocs{Version: version, Markdown: markdown}
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, id); err != nil {
			return auditEntry{}, err
		}
		var at time.Time
		err := tx.QueryRow(ctx, `update listing_versions set docs = $3, docs_updated_at = now()
			where listing_id = $1::uuid and version = $2 returning docs_updated_at`, id, version, markdown).Scan(&at)
		if errors.Is(err, pgx.ErrNoRows) {
			return auditEntry{}, fmt.Errorf("%w: the listing has no version %q", ErrNotFound, version)
		}
		d.UpdatedAt = &at
		return auditEntry{"listing.version.docs", "listing", id, map[string]any{"version": version, "bytes": len(markdown)}}, err
	})
	return d, err
}

// getDocs returns the documentation of a version of listing id to whoever
// may see the listing; an anonymous caller, as with the versions, only of
// versions that can be loaded.
func (s *store) getDocs(ctx context.Context, p *principal, id, version string) (registryapi.VersionDocs, error) {
	d := registryapi.VersionDocs{Version: version}
	if _, err := s.getListing(ctx, s.db, p, id); err != nil {
		return d, err
	}
	err := s.db.QueryRow(ctx, `select v.docs, v.docs_updated_at from listing_versions v join listings l on l.id = v.listing_id
		left join validation_jobs j on j.repository_id = l.repository_id and j.manifest_digest = v.manifest_digest
		where v.listing_id = $1::uuid and v.version = $2 and (not $3 or coalesce(j.state, 'pending') = 'available')`,
		id, version, p == nil).Scan(&d.Markdown, &d.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("%w: the listing has no version %q", ErrNotFound, version)
	}
	return d, err
}
