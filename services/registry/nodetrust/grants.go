package nodetrust

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/jackc/pgx/v5"
)

// Caller is who asks for a grant: the account behind the credentials the
// tenant gave the node.
type Caller struct {
	ID   string
	Role string // "tenant", "isv" or "admin" (package auth's roles)
}

// Entitled returns the listing through which tenant tenantID may run digest
// of repo: an active entitlement of an enabled account to a listing of repo
// whose versions include the digest. ok is false when there is none.
func Entitled(ctx context.Context, q DBTX, tenantID, repo, digest string) (listingID string, ok bool, err error) {
	err = q.QueryRow(ctx, `select l.id::text from listings l
		join repositories r on r.id = l.repository_id
		join listing_versions v on v.listing_id = l.id and v.manifest_digest = $3
		join entitlements e on e.listing_id = l.id and e.revoked_at is null
			and (e.expires_at is null or e.expires_at > now())
		join accounts a on a.id = e.account_id and not a.disabled
		where r.name = $2 and a.id = $1::uuid
		order by e.created_at limit 1`, tenantID, repo, digest).Scan(&listingID)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("nodetrust: entitlement: %w", err)
	}
	return listingID, true, nil
}

// Issue grants node req.NodeID the load of req.Digest of req.Repository for
// c, valid for ttl (zero: DefaultGrantTTL). The node must be trusted. A
// tenant must be entitled to the image; an ISV may grant loads of its own
// repositories (namespace = its name) and an admin any.
func Issue(ctx context.Context, q DBTX, c Caller, req registryapi.GrantRequest, ttl time.Duration) (registryapi.Grant, error) {
	if ttl <= 0 {
		ttl = DefaultGrantTTL
	}
	if err := Trusted(ctx, q, req.NodeID); err != nil {
		return registryapi.Grant{}, err
	}
	var listing *string
	switch c.Role {
	case "tenant":
		id, ok, err := Entitled(ctx, q, c.ID, req.Repository, req.Digest)
		if err != nil {
			return registryapi.Grant{}, err
		}
		if !ok {
			return registryapi.Grant{}, fmt.Errorf("%w: no entitlement to %s@%s", ErrPermission, req.Repository, req.Digest)
		}
		listing = &id
	case "isv":
		var owns bool
		err := q.QueryRow(ctx, `select exists (select 1 from repositories where name = $1 and owner_id = $2::uuid)`,
			req.Repository, c.ID).Scan(&owns)
		if err != nil {
			return registryapi.Grant{}, fmt.Errorf("nodetrust: repository: %w", err)
		}
		if !owns {
			return registryapi.Grant{}, fmt.Errorf("%w: %s is not your repository", ErrPermission, req.Repository)
		}
	case "admin":
	default:
		return registryapi.Grant{}, fmt.Errorf("%w: a %s account cannot grant loads", ErrPermission, c.Role)
	}
	secret, hash := newSecret(GrantPrefix)
	g := registryapi.Grant{Secret: secret, TenantID: c.ID, NodeID: req.NodeID, Repository: req.Repository, Digest: req.Digest, ListingID: listing}
	err := q.QueryRow(ctx, `insert into load_grants (secret_hash, tenant_id, node_id, repository, manifest_digest, listing_id, expires_at)
		values ($1, $2::uuid, $3::uuid, $4, $5, $6::uuid, now() + $7::interval) returning id::text, expires_at`,
		hash, c.ID, req.NodeID, req.Repository, req.Digest, listing, fmt.Sprintf("%d microseconds", ttl.Microseconds())).
		Scan(&g.ID, &g.ExpiresAt)
	if err != nil {
		return registryapi.Grant{}, fmt.Errorf("nodetrust: grant: %w", err)
	}
	return g, nil
}

// Redeem spends grant secret for a key release to node req.NodeID of
// req.Digest of req.Repository. It succeeds once per grant, before the
// grant expires, for the node, repository and digest it names, while the
// node is trusted; everything else is ErrInvalid (or the node's state),
// without saying which part failed.
func Redeem(ctx context.Context, q DBTX, secret string, req registryapi.GrantRequest) (registryapi.Grant, error) {
	if err := Trusted(ctx, q, req.NodeID); err != nil {
		return registryapi.Grant{}, err
	}
	if !wellFormed(secret, GrantPrefix) {
		return registryapi.Grant{}, fmt.Errorf("%w: load grant", ErrInvalid)
	}
	g := registryapi.Grant{NodeID: req.NodeID, Repository: req.Repository, Digest: req.Digest}
	err := q.QueryRow(ctx, `update load_grants set redeemed_at = now()
		where secret_hash = $1 and redeemed_at is null and expires_at > now()
			and node_id = $2::uuid and repository = $3 and manifest_digest = $4
		returning id::text, tenant_id::text, listing_id::text, expires_at`,
		hashOf(secret), req.NodeID, req.Repository, req.Digest).Scan(&g.ID, &g.TenantID, &g.ListingID, &g.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return registryapi.Grant{}, fmt.Errorf("%w: load grant (unknown, used, expired, or for another node or image)", ErrInvalid)
	}
	if err != nil {
		return registryapi.Grant{}, fmt.Errorf("nodetrust: redeem: %w", err)
	}
	return g, nil
}

// UsageGrant returns grant grantID when node nodeID may report usage of
// tenantID under it: the grant was given to that node for that tenant, and
// for a load event it backs fewer than MaxLoadsPerGrant load records so far.
// Otherwise ErrPermission.
func UsageGrant(ctx context.Context, q DBTX, nodeID, tenantID, grantID, event string) (registryapi.Grant, error) {
	if !uuidRE.MatchString(grantID) || !uuidRE.MatchString(tenantID) {
		return registryapi.Grant{}, fmt.Errorf("%w: no such grant", ErrPermission)
	}
	g := registryapi.Grant{ID: grantID}
	var loads int
	err := q.QueryRow(ctx, `select g.tenant_id::text, g.node_id::text, g.repository, g.manifest_digest, g.listing_id::text,
			g.expires_at, (select count(*) from usage_records u where u.grant_id = g.id and u.event = 'load')
		from load_grants g where g.id = $1::uuid and g.node_id = $2::uuid and g.tenant_id = $3::uuid`,
		grantID, nodeID, tenantID).Scan(&g.TenantID, &g.NodeID, &g.Repository, &g.Digest, &g.ListingID, &g.ExpiresAt, &loads)
	if errors.Is(err, pgx.ErrNoRows) {
		return registryapi.Grant{}, fmt.Errorf("%w: no grant %s to this node for this tenant", ErrPermission, grantID)
	}
	if err != nil {
		return registryapi.Grant{}, fmt.Errorf("nodetrust: usage grant: %w", err)
	}
	if event == "load" && loads >= MaxLoadsPerGrant {
		return registryapi.Grant{}, fmt.Errorf("%w: grant %s already backs %d loads", ErrPermission, grantID, loads)
	}
	return g, nil
}
