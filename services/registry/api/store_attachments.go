package api

// The accelerator pool's SQL (sdk/poolapi; docs/ARCHITECTURE.md, "Attach"):
// attachments placed on nodes, their leases, the nodes' assignments and reports, and the
// reaper that ends what nobody renews or whose node went silent.

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
	"github.com/fpga-faas/faas/services/registry/placement"
	"github.com/fpga-faas/faas/shell"
)

// ErrGone: the attachment has ended (410, code attachment_ended).
var ErrGone = errors.New("api: gone")

// Attach defaults (AttachConfig's zero values).
const (
	DefaultNodeLostAfter   = 90 * time.Second
	DefaultReapInterval    = time.Second
	DefaultKeepWarm        = 2 * time.Minute
	DefaultMaxPerTenant    = 16
	maxGrantsPerAttachment = 4
	// poolLock serialises placements (pg_advisory_xact_lock), across
	// replicas too, so that two attachments never take the same free
	// chip; and the revisions of attachments (lockRevisions).
	poolLock int64 = 0x66616173_706f6f6c // "faaspool"
)

// AttachConfig configures the accelerator pool.
type AttachConfig struct {
	// NodeLostAfter is how long a node may go without a heartbeat before
	// its attachments are lost. Zero: DefaultNodeLostAfter.
	NodeLostAfter time.Duration
	// ReapInterval is how often leases and nodes are checked. Zero:
	// DefaultReapInterval.
	ReapInterval time.Duration
	// KeepWarm is how long a node keeps an image loaded for its tenant
	// after a detach (faasd's own setting must match); within it, the
	// tenant's next attach of the image needs no load. Zero:
	// DefaultKeepWarm.
	KeepWarm time.Duration
	// MaxPerTenant is how many live attachments one tenant may hold, so
	// that no tenant takes the whole pool. Zero: DefaultMaxPerTenant.
	MaxPerTenant int
}

func (c AttachConfig) withDefaults() AttachConfig {
	if c.NodeLostAfter <= 0 {
		c.NodeLostAfter = DefaultNodeLostAfter
	}
	if c.ReapInterval <= 0 {
		c.ReapInterval = DefaultReapInterval
	}
	if c.KeepWarm <= 0 {
		c.KeepWarm = DefaultKeepWarm
	}
	if c.MaxPerTenant <= 0 {
		c.MaxPerTenant = DefaultMaxPerTenant
	}
	return c
}

var liveStates = []string{string(poolapi.Pending), string(poolapi.Loading), string(poolapi.Ready)}

const attachmentCols = `a.id::text, t.name, coalesce(a.listing_id::text, ''), coalesce(l.name, ''), a.version, a.repository,
	a.manifest_digest, a.share, a.state, a.error, a.warm, a.node_id::text, n.name, n.endpoint, n.tls_certificate, a.slot,
	a.lease_seconds, a.lease_expires_at, a.created_at, a.ready_at, a.ended_at`

const attachmentFrom = ` from attachments a join accounts t on t.id = a.tenant_id join nodes n on n.id = a.node_id
	left join listings l on l.id = a.listing_id `

func scanAttachment(r pgx.Row) (poolapi.Attachment, error) {
	var a poolapi.Attachment
	var st string
	err := r.Scan(&a.ID, &a.Tenant, &a.ListingID, &a.Listing, &a.Version, &a.Repository, &a.Digest, &a.Share, &st, &a.Error,
		&a.Warm, &a.NodeID, &a.Node, &a.Endpoint, &a.TLSCertificate, &a.Slot, &a.LeaseSeconds, &a.LeaseExpiresAt,
		&a.CreatedAt, &a.ReadyAt, &a.EndedAt)
	a.State = poolapi.State(st)
	a.ServerName = poolapi.ServerName(a.NodeID)
	return a, err
}

// target is the image an attach request names.
type target struct {
	listingID, listing, version, repository, digest string
}

// resolveTarget finds the listing (by id or repository) and version of
// req that tenant p is entitled to.
func (s *store) resolveTarget(ctx context.Context, tx pgx.Tx, p *principal, req poolapi.AttachRequest) (target, error) {
	var t target
	err := tx.QueryRow(ctx, `select l.id::text, l.name, r.name from listings l join repositories r on r.id = l.repository_id
		where ($1 <> '' and l.id::text = $1) or r.name = $1 order by l.created_at limit 1`, req.Listing).
		Scan(&t.listingID, &t.listing, &t.repository)
	if errors.Is(err, pgx.ErrNoRows) {
		return t, fieldErr("listing", "no listing with id or repository %q", req.Listing)
	}
	if err != nil {
		return t, err
	}
	err = tx.QueryRow(ctx, `select version, manifest_digest from listing_versions where listing_id = $1::uuid
		and ($2 = '' or version = $2) order by created_at desc limit 1`, t.listingID, req.Version).Scan(&t.version, &t.digest)
	if errors.Is(err, pgx.ErrNoRows) {
		if req.Version == "" {
			return t, fieldErr("listing", "listing %q has no version yet", t.listing)
		}
		return t, fieldErr("version", "listing %q has no version %q", t.listing, req.Version)
	}
	if err != nil {
		return t, err
	}
	if _, ok, err := nodetrust.Entitled(ctx, tx, p.ID, t.repository, t.digest); err != nil {
		return t, err
	} else if !ok {
		return t, fmt.Errorf("%w: you are not entitled to listing %q: subscribe to it first", ErrForbidden, t.listing)
	}
	return t, nil
}

// chipNeeds returns the FPGA part each chip of image digest of repository
// needs, in board order, and the chip of a board each is for (-1: either),
// as its validation recorded them; nil when the image was not validated
// (or before migration 008), which placement takes as any chip.
func chipNeeds(ctx context.Context, tx pgx.Tx, repository, digest string) (parts []string, indexes []int, err error) {
	err = tx.QueryRow(ctx, `select j.parts, j.chip_indexes from validation_jobs j join repositories r on r.id = j.repository_id
		where r.name = $1 and j.manifest_digest = $2 and j.state = 'available'`, repository, digest).Scan(&parts, &indexes)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	return parts, indexes, err
}

// chipParts is the part of each chip of board b, in order: as the node
// reported it, else as the board model of shell v1 names it, else "" (a
// model this registry does not know, which takes only images of unknown
// part).
func chipParts(b registryapi.Board) []string {
	out := make([]string, len(b.Slots))
	m, err := shell.ModelByName(b.Model)
	for k, sl := range b.Slots {
		switch {
		case sl.Part != "":
			out[k] = sl.Part
		case err == nil && k < len(m.Parts):
			out[k] = m.Parts[k].Name
		}
	}
	return out
}

// chipsOf counts the bitstream layers of a manifest: the chips its image
// takes.
func chipsOf(content []byte) int {
	var m struct {
		Layers []struct {
			MediaType string `json:"mediaType"`
		} `json:"layers"`
	}
	n := 0
	if json.Unmarshal(content, &m) == nil {
		for _, l := range m.Layers {
			if l.MediaType == string(image.BitstreamMediaType) || l.MediaType == string(image.SealedBitstreamMediaType) {
				n++
			}
		}
	}
	return max(1, min(n, shell.ChipsPerBoard))
}

// candidates reads the nodes that may take attachments: trusted, serving
// remote attach with a pinned certificate, heartbeating within lostAfter.
func (s *store) candidates(ctx context.Context, tx pgx.Tx, cfg AttachConfig) ([]placement.Node, error) {
	rows, err := tx.Query(ctx, `select id::text, boards, last_heartbeat_at from nodes where approved_at is not null and revoked_at is null
		and endpoint <> '' and tls_certificate <> '' and last_heartbeat_at > now() - $1::interval`, interval(cfg.NodeLostAfter))
	if err != nil {
		return nil, err
	}
	byID := map[string]*placement.Node{}
	heard := map[string]time.Time{}
	var nodes []*placement.Node
	for rows.Next() {
		var id string
		var raw []byte
		var at time.Time
		if err := rows.Scan(&id, &raw, &at); err != nil {
			rows.Close()
			return nil, err
		}
		var boards []registryapi.Board
		_ = json.Unmarshal(raw, &boards) // checked when the heartbeat was taken
		n := &placement.Node{ID: id, Held: map[int]bool{}, Shares: map[int]int{}, ShareDigest: map[int]string{}, Warm: map[int]string{}}
		for _, b := range boards {
			var bs []placement.Slot
			parts := chipParts(b)
			for k, sl := range b.Slots {
				bs = append(bs, placement.Slot{Index: sl.Index, Chip: k, State: sl.State, Digest: sl.Digest, Part: parts[k]})
			}
			n.Boards = append(n.Boards, bs)
		}
		byID[id], heard[id] = n, at
		nodes = append(nodes, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Every live attachment (each share counts towards its chip's windows),
	// and the latest ended whole attachment of each slot: warm when it was
	// detached lately and its node kept the image (or will: it keeps what a
	// detach ends).
	rows, err = tx.Query(ctx, `select node_id::text, slot, chips, share, tenant_id::text, manifest_digest, ended_at,
		state = any($1) as live, state = 'detached' and ready_at is not null and ended_at > now() - $2::interval and not scrubbed as warm
		from (select * from attachments where state = any($1)
			union all
			select * from (select distinct on (node_id, slot) * from attachments
				where not state = any($1) and not share and ended_at > now() - $2::interval
				order by node_id, slot, revision desc) e) x`, liveStates, interval(cfg.KeepWarm))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, tenant, digest string
		var slot, chips int
		var share, live, warm bool
		var ended *time.Time
		if err := rows.Scan(&id, &slot, &chips, &share, &tenant, &digest, &ended, &live, &warm); err != nil {
			return nil, err
		}
		n := byID[id]
		if n == nil {
			continue
		}
		if warm && ended != nil && heard[id].Before(*ended) {
			// No heartbeat since the detach: the node keeps what it had
			// loaded for the attachment, whatever an older one said.
			loadedAt(n, slot, chips, digest)
		}
		for i := slot; i < slot+chips; i++ {
			switch {
			case live && share:
				// The registry's record that the chip runs digest for
				// shares: a next share joins it before the node's
				// heartbeat shows the image loaded.
				n.Shares[i]++
				n.ShareDigest[i] = digest
			case live:
				n.Held[i] = true
			case warm:
				n.Warm[i] = tenant
			}
		}
		if live {
			n.Live++
		}
	}
	out := make([]placement.Node, len(nodes))
	for i, n := range nodes {
		out[i] = *n
	}
	return out, rows.Err()
}

// loadedAt marks slots [slot, slot+chips) of n as running digest.
func loadedAt(n *placement.Node, slot, chips int, digest string) {
	for _, b := range n.Boards {
		for k := range b {
			if b[k].Index >= slot && b[k].Index < slot+chips {
				b[k].State, b[k].Digest = placement.Loaded, digest
			}
		}
	}
}

func interval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// newCredential returns a tenant's credential for attachment id and the
// SHA-256 of its secret.
func newCredential(id string) (string, [32]byte) {
	var secret [32]byte
	rand.Read(secret[:])
	return poolapi.CredentialPrefix + id + "_" + base64.RawURLEncoding.EncodeToString(secret[:]), sha256.Sum256(secret[:])
}

// createAttachment places an attachment for p, a tenant, and returns it
// with its credential.
func (s *store) createAttachment(ctx context.Context, p *principal, cfg AttachConfig, req poolapi.AttachRequest) (poolapi.Attachment, error) {
	var out poolapi.Attachment
	// The spend limit is checked before the pool's lock is taken, so that
	// pricing the tenant's month never holds up placements.
	_, err := s.attachSpendGate(ctx, p, `select l.currency from listings l join repositories r on r.id = l.repository_id
		where ($1 <> '' and l.id::text = $1) or r.name = $1 order by l.created_at limit 1`, req.Listing)
	if err != nil {
		return out, err
	}
	err = s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if err := lockRevisions(ctx, tx); err != nil { // also serialises placements
			return auditEntry{}, err
		}
		var held int
		if err := tx.QueryRow(ctx, `select count(*) from attachments where tenant_id = $1::uuid and state = any($2)`,
			p.ID, liveStates).Scan(&held); err != nil {
			return auditEntry{}, err
		}
		if held >= cfg.MaxPerTenant {
			return auditEntry{}, fmt.Errorf("%w: you hold %d attachments, the most a tenant may; detach one first (faas attachments lists them)",
				ErrConflict, held)
		}
		t, err := s.resolveTarget(ctx, tx, p, req)
		if err != nil {
			return auditEntry{}, err
		}
		// Through tx, not the metadata store's connections: this transaction
		// holds the pool's lock, and waiting for a second connection
		// while the others queue on the lock deadlocks every replica.
		var content []byte
		err = tx.QueryRow(ctx, `select m.content from manifests m join repositories r on r.id = m.repository_id
			where r.name = $1 and m.digest = $2`, t.repository, t.digest).Scan(&content)
		if errors.Is(err, pgx.ErrNoRows) {
			err = meta.ErrManifestUnknown
		}
		if err != nil {
			return auditEntry{}, fmt.Errorf("api: manifest of %s@%s: %w", t.repository, t.digest, err)
		}
		chips := chipsOf(content)
		if req.Share && chips > 1 {
			return auditEntry{}, fieldErr("share", "listing %q is a two-chip image: it takes a whole board and cannot be shared", t.listing)
		}
		parts, indexes, err := chipNeeds(ctx, tx, t.repository, t.digest)
		if err != nil {
			return auditEntry{}, err
		}
		nodes, err := s.candidates(ctx, tx, cfg)
		if err != nil {
			return auditEntry{}, err
		}
		preq := placement.Request{TenantID: p.ID, Digest: t.digest, Chips: chips, Share: req.Share, MaxShares: shell.Windows - 1,
			Parts: parts, Indexes: indexes, Exclude: req.ExcludeNodes}
		c, err := placement.Place(nodes, preq)
		if errors.Is(err, placement.ErrNoCapacity) {
			excluded := ""
			if len(req.ExcludeNodes) > 0 {
				excluded = fmt.Sprintf(", %d excluded", len(req.ExcludeNodes))
			}
			hint := "try again later or ask for a share"
			if len(parts) > 0 {
				hint = "the image runs only on chips of the part it was built for; try again later"
			}
			return auditEntry{}, fmt.Errorf("%w: no node in the pool has %s for %s %s now (%d candidate nodes%s); %s",
				ErrConflict, placement.Wanted(preq), t.listing, t.version, len(nodes), excluded, hint)
		}
		if err != nil {
			return auditEntry{}, err
		}
		lease := cmp.Or(req.LeaseSeconds, poolapi.DefaultLeaseSeconds)
		var id string
		if err := tx.QueryRow(ctx, `select gen_random_uuid()::text`).Scan(&id); err != nil {
			return auditEntry{}, err
		}
		cred, hash := newCredential(id)
		if _, err := tx.Exec(ctx, `insert into attachments (id, tenant_id, listing_id, version, repository, manifest_digest, node_id,
			slot, chips, share, state, warm, credential_hash, lease_seconds, lease_expires_at)
			values ($1::uuid, $2::uuid, $3::uuid, $4, $5, $6, $7::uuid, $8, $9, $10, 'pending', $11, $12, $13::int, now() + $13::int * interval '1 second')`,
			id, p.ID, t.listingID, t.version, t.repository, t.digest, c.NodeID, c.Slot, chips, req.Share, c.Warm, hash[:], lease); err != nil {
			return auditEntry{}, err
		}
		if _, err := tx.Exec(ctx, `insert into usage_records (node_id, tenant_id, listing_id, manifest_digest, slot, event, started_at,
			report_id, attachment_id) values ($1::uuid, $2::uuid, $3::uuid, $4, $5, 'attach', now(), 'attachment/' || $6, $6::uuid)`,
			c.NodeID, p.ID, t.listingID, t.digest, c.Slot, id); err != nil {
			return auditEntry{}, err
		}
		if err := notify(ctx, tx); err != nil {
			return auditEntry{}, err
		}
		out, err = scanAttachment(tx.QueryRow(ctx, `select `+attachmentCols+attachmentFrom+`where a.id = $1::uuid`, id))
		out.Credential = cred
		return auditEntry{"attachment.create", "attachment", id, map[string]any{"listing_id": t.listingID, "version": t.version,
			"digest": t.digest, "node_id": c.NodeID, "slot": c.Slot, "share": req.Share, "warm": c.Warm, "lease_seconds": lease,
			"parts": parts, "exclude_nodes": req.ExcludeNodes}}, err
	})
	return out, err
}

// getAttachment returns attachment id: the tenant's own, or any for an admin.
func (s *store) getAttachment(ctx context.Context, p *principal, id string) (poolapi.Attachment, error) {
	if !isUUID(id) {
		return poolapi.Attachment{}, fmt.Errorf("%w: attachment", ErrNotFound)
	}
	a, err := scanAttachment(s.db.QueryRow(ctx, `select `+attachmentCols+attachmentFrom+`where a.id = $1::uuid
		and ($2 or a.tenant_id = nullif($3, '')::uuid)`, id, p.is(auth.RoleAdmin), p.ID))
	return a, noRows(err, "attachment")
}

// listAttachments lists p's attachments, newest first; an admin's with
// all, everyone's. Ended ones are listed for a day.
func (s *store) listAttachments(ctx context.Context, p *principal, all bool, limit int) ([]poolapi.Attachment, error) {
	rows, err := s.db.Query(ctx, `select `+attachmentCols+attachmentFrom+`where (($1 and $2) or a.tenant_id = $3::uuid)
		and (a.ended_at is null or a.ended_at > now() - interval '1 day') order by a.created_at desc limit $4`,
		all, p.is(auth.RoleAdmin), p.ID, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (poolapi.Attachment, error) { return scanAttachment(r) })
}

// renewAttachment extends the lease of p's live attachment id by its
// lease; an ended one is ErrGone. Renewals are not audited: they come
// every few seconds and change nothing but the lease.
func (s *store) renewAttachment(ctx context.Context, p *principal, id string) (poolapi.Attachment, error) {
	if !isUUID(id) {
		return poolapi.Attachment{}, fmt.Errorf("%w: attachment", ErrNotFound)
	}
	if _, err := s.attachSpendGate(ctx, p, `select l.currency from attachments a join listings l on l.id = a.listing_id
		where a.id = $1::uuid and a.state = any($2)`, id, liveStates); err != nil {
		if errors.Is(err, ErrSpendLimit) {
			err = fmt.Errorf("%w; attachment %s is not renewed and ends when its lease runs out", err, id)
		}
		return poolapi.Attachment{}, err
	}
	tag, err := s.db.Exec(ctx, `update attachments set lease_expires_at = now() + lease_seconds * interval '1 second'
		where id = $1::uuid and tenant_id = $2::uuid and state = any($3)`, id, p.ID, liveStates)
	if err != nil {
		return poolapi.Attachment{}, err
	}
	a, err := s.getAttachment(ctx, p, id)
	if err == nil && tag.RowsAffected() == 0 {
		return a, fmt.Errorf("%w: attachment %s has ended: %s", ErrGone, id, endedWhy(a))
	}
	return a, err
}

// endedWhy says, for the tenant, why an attachment ended.
func endedWhy(a poolapi.Attachment) string {
	switch a.State {
	case poolapi.Expired:
		return "its lease expired"
	case poolapi.Lost:
		return "its node " + a.Node + " stopped answering"
	case poolapi.Detached:
		return "it was detached"
	case poolapi.Failed:
		return "the node could not load it: " + a.Error
	}
	return string(a.State)
}

// lockRevisions orders the transactions that give attachments revisions:
// a node that has seen revision R must never later find a change below R
// commit, which it would miss. Every such transaction takes this lock
// before nextval('attachment_revision').
func lockRevisions(ctx context.Context, tx pgx.Tx) error {
	_, err := tx.Exec(ctx, `select pg_advisory_xact_lock($1)`, poolLock)
	return err
}

// end ends live attachment id (tenant's, unless tenant is "") with state,
// closing its usage record; ok is false when it was not live.
func end(ctx context.Context, tx pgx.Tx, id, tenant string, state poolapi.State, msg string) (ok bool, err error) {
	tag, err := tx.Exec(ctx, `update attachments set state = $2, error = $4, ended_at = now(), revision = nextval('attachment_revision'),
		released_at = case when $2 = 'failed' then now() end
		where id = $1::uuid and ($3 = '' or tenant_id = $3::uuid) and state = any($5)`, id, string(state), tenant, msg, liveStates)
	if err != nil || tag.RowsAffected() == 0 {
		return false, err
	}
	if _, err := tx.Exec(ctx, `update usage_records set ended_at = now() where attachment_id = $1::uuid and ended_at is null`, id); err != nil {
		return false, err
	}
	return true, notify(ctx, tx)
}

// detachAttachment ends p's attachment id at once; detaching an ended
// one changes nothing.
func (s *store) detachAttachment(ctx context.Context, p *principal, id string) (poolapi.Attachment, error) {
	if _, err := s.getAttachment(ctx, p, id); err != nil {
		return poolapi.Attachment{}, err
	}
	err := s.tx(ctx, p, func(tx pgx.Tx) (auditEntry, error) {
		if err := lockRevisions(ctx, tx); err != nil {
			return auditEntry{}, err
		}
		owner := p.ID
		if p.is(auth.RoleAdmin) {
			owner = ""
		}
		ok, err := end(ctx, tx, id, owner, poolapi.Detached, "")
		if err == nil && !ok {
			err = errNoChange
		}
		return auditEntry{"attachment.detach", "attachment", id, nil}, err
	})
	if err != nil && !errors.Is(err, errNoChange) {
		return poolapi.Attachment{}, err
	}
	return s.getAttachment(ctx, p, id)
}

// errNoChange rolls back a transaction that found nothing to do.
var errNoChange = errors.New("api: no change")
