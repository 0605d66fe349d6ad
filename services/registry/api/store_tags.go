package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/meta"
)

func scanTagRule(r pgx.Row) (registryapi.TagRule, error) {
	var t registryapi.TagRule
	return t, r.Scan(&t.ID, &t.Pattern, &t.CreatedAt)
}

func (s *store) tagRules(ctx context.Context, p *principal, listingID string) ([]registryapi.TagRule, error) {
	if _, err := s.managedListing(ctx, s.db, p, listingID); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `select r.id::text, r.pattern, r.created_at from tag_rules r
		join listings l on l.repository_id = r.repository_id where l.id = $1::uuid order by r.pattern collate "C"`, listingID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (registryapi.TagRule, error) { return scanTagRule(r) })
}

func (s *store) addTagRule(ctx context.Context, p *principal, listingID, pattern string) (registryapi.TagRule, error) {
	var t registryapi.TagRule
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, listingID); err != nil {
			return auditEntry{}, err
		}
		var n int
		if err := tx.QueryRow(ctx, `select count(*) from tag_rules r join listings l on l.repository_id = r.repository_id
			where l.id = $1::uuid`, listingID).Scan(&n); err != nil {
			return auditEntry{}, err
		}
		if n >= registryapi.MaxTagRules {
			return auditEntry{}, fmt.Errorf("%w: the repository has %d tag rules already", ErrConflict, n)
		}
		var err error
		t, err = scanTagRule(tx.QueryRow(ctx, `insert into tag_rules (repository_id, pattern, created_by)
			select repository_id, $2, nullif($3, '')::uuid from listings where id = $1::uuid
			returning id::text, pattern, created_at`, listingID, pattern, p.ID))
		if errors.Is(pgErr(err), ErrConflict) {
			return auditEntry{}, fmt.Errorf("%w: the rule %q exists", ErrConflict, pattern)
		}
		return auditEntry{"listing.tag_rule.create", "listing", listingID, map[string]any{"pattern": pattern}}, err
	})
	return t, err
}

func (s *store) deleteTagRule(ctx context.Context, p *principal, listingID, ruleID string) error {
	return s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if _, err := s.ownListing(ctx, tx, p, listingID); err != nil {
			return auditEntry{}, err
		}
		var pattern string
		err := tx.QueryRow(ctx, `delete from tag_rules r using listings l
			where l.id = $1::uuid and r.repository_id = l.repository_id and r.id = $2::uuid returning r.pattern`,
			listingID, ruleID).Scan(&pattern)
		return auditEntry{"listing.tag_rule.delete", "listing", listingID, map[string]any{"pattern": pattern}}, noRows(err, "tag rule")
	})
}

// tag reports the state of tag in the repository of listing listingID.
func (s *store) tag(ctx context.Context, p *principal, listingID, tag string) (registryapi.Tag, error) {
	t := registryapi.Tag{Name: tag}
	l, err := s.managedListing(ctx, s.db, p, listingID)
	if err != nil {
		return t, err
	}
	err = s.meta.TagImmutable(ctx, l.Repository, tag)
	var ie *meta.ImmutableError
	if errors.As(err, &ie) {
		t.Immutable, t.Reason = true, ie.Error()
		err = nil
	}
	if err != nil {
		return t, err
	}
	m, err := s.meta.GetManifest(ctx, l.Repository, tag)
	switch {
	case err == nil:
		t.Digest = m.Digest
	case !isMetaNotFound(err):
		return t, err
	}
	return t, nil
}
