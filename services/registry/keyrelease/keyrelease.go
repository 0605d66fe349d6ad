// Package keyrelease releases the data keys of sealed images: what the
// API's POST /api/v1/keys/release (a route of package api, for node
// accounts) does, by which a registered node obtains the data keys of a
// sealed image for a tenant, wrapped to that node's X25519 public key only.
//
// # Where the data keys come from
//
// ISVs seal their images to the registry's recipient key
// (validation.RecipientPubFile; `hdk seal --recipient platform-seal.pub`),
// which writes the wrapped data keys to DIR.keys.json, never into the image.
// The ISV pushes that file to the image's repository as an OCI artifact whose
// subject is the sealed image: artifactType [KeysArtifactType], one layer
// holding the keys.json bytes (e.g. `oras attach --artifact-type
// application/vnd.faas.image.keys.v1+json REPO@DIGEST DIR.keys.json`). The
// keys are ciphertext to the registry's key, so the artifact is harmless to
// whoever may pull the repository; only the namespace owner may push it.
//
// # Request
//
//	POST /api/v1/keys/release
//	{"node_id": UUID, "repository": NAME, "digest": "sha256:…", "grant": "fgr_…",
//	 "tenant_id": UUID, "tenant": NAME}   (tenant fields optional; checked against the grant)
//
// authenticated like the rest of /api/v1 (auth.AuthenticateRequest) as an
// account of role node. grant is a load grant
// (package nodetrust) that the tenant's credentials obtained for this node
// and image: a node account alone proves nothing about a tenant, so without
// a grant no key leaves the registry. The grant is spent by the request,
// whatever its outcome. The answer is
//
//	{"wrapped_keys": [{"chip": "0", "layer": "sha256:…", "key_id": HEX, "wrapped_key": BASE64}]}
//
// with one entry per sealed layer of the image, each data key wrapped
// (hdk/seal.WrapKey) to the node's registered public key. Refusals: 401 bad
// credentials; 429 too many failed password checks, 503 too many at once
// (auth.Limits, both with Retry-After); 503 code unavailable with
// Retry-After when the database cannot serve the release for now (out of
// disk space, read-only, unreachable; the message names the cause); 403 caller is not a node account,
// the node is not approved or revoked (code node_untrusted), the grant is
// unknown, spent, expired or names another node, image or tenant
// (grant_invalid), or the grant's tenant holds no active entitlement to a
// listing of the repository whose versions include the digest; 404 the node is unknown or belongs to
// another account; 409 the image is not validated (available), not sealed,
// or the registry holds no data key for one of its sealed layers.
// Every release and every refusal after authentication is recorded in
// audit_log (action "keys.release", outcome "ok" or "denied: …", details
// naming the grant).
//
// The package logs only through Config.Logger.
package keyrelease

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// KeysArtifactType is the artifactType of the side artifact that carries an
// image's keys.json (hdk seal output) to the registry.
const KeysArtifactType = image.KeysArtifactType

const maxKeysBytes = 1 << 20

// Config configures a Releaser; Pool, Meta, Blobs and Recipient are
// required.
type Config struct {
	Pool      *pgxpool.Pool
	Meta      *meta.Store
	Blobs     blob.Store
	Recipient *ecdh.PrivateKey // the platform's X25519 key ISVs seal to
	Logger    *slog.Logger     // default: discard
}

// Refusals of Release wrap one of these.
var (
	ErrInvalid       = errors.New("keyrelease: invalid request")
	ErrForbidden     = errors.New("keyrelease: forbidden")
	ErrNodeUntrusted = errors.New("keyrelease: node untrusted")
	ErrGrantInvalid  = errors.New("keyrelease: grant invalid")
	ErrNotFound      = errors.New("keyrelease: not found")
	ErrConflict      = errors.New("keyrelease: conflict")
)

// refusal is a refusal of Release: a sentinel and the reason, written for
// the node's operator.
type refusal struct {
	kind   error
	reason string
}

func (r *refusal) Error() string { return r.kind.Error() + ": " + r.reason }
func (r *refusal) Unwrap() error { return r.kind }

func refuse(kind error, format string, args ...any) *refusal {
	return &refusal{kind: kind, reason: fmt.Sprintf(format, args...)}
}

// Releaser releases data keys to nodes.
type Releaser struct{ cfg Config }

// New returns a Releaser.
func New(cfg Config) (*Releaser, error) {
	if cfg.Pool == nil || cfg.Meta == nil || cfg.Blobs == nil || cfg.Recipient == nil {
		return nil, errors.New("keyrelease: Config needs Pool, Meta, Blobs and Recipient")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Releaser{cfg: cfg}, nil
}

// Caller is the authenticated account asking, with what the audit log
// records of its request.
type Caller struct {
	ID, Name   string
	Role       auth.Role
	RequestID  string
	RemoteAddr string
}

// Release releases the data keys of req's image to req's node for c, a
// node account, spending req's grant; every release and every refusal is
// recorded in the audit log, and a release that cannot be recorded
// releases nothing.
func (h *Releaser) Release(ctx context.Context, c Caller, req registryapi.KeyRelease) (registryapi.KeyReleaseResult, error) {
	resp, grantID, err := h.release(ctx, c, req)
	if err != nil {
		outcome := "denied: internal error"
		var rf *refusal
		if errors.As(err, &rf) {
			outcome = "denied: " + rf.reason
		}
		h.audit(ctx, c, req, grantID, outcome, nil)
		return registryapi.KeyReleaseResult{}, err
	}
	layers := make([]string, len(resp.WrappedKeys))
	for i, k := range resp.WrappedKeys {
		layers[i] = k.Layer
	}
	if err := h.audit(ctx, c, req, grantID, "ok", layers); err != nil {
		return registryapi.KeyReleaseResult{}, err // no audit record, no key
	}
	return resp, nil
}

// RecordRefusal records a request refused before Release could read it
// (a malformed body), so that the audit log holds every attempt.
func (h *Releaser) RecordRefusal(ctx context.Context, c Caller, reason string) {
	h.audit(ctx, c, registryapi.KeyRelease{}, "", "denied: "+reason, nil)
}

func (h *Releaser) release(ctx context.Context, c Caller, req registryapi.KeyRelease) (registryapi.KeyReleaseResult, string, error) {
	if c.Role != auth.RoleNode {
		return registryapi.KeyReleaseResult{}, "", refuse(ErrForbidden, "only node accounts may ask for keys")
	}
	if req.NodeID == "" || req.Repository == "" || req.Digest == "" || req.Grant == "" {
		return registryapi.KeyReleaseResult{}, "", refuse(ErrInvalid, "node_id, repository, digest and grant are required")
	}
	if _, err := blob.ParseDigest(req.Digest); err != nil {
		return registryapi.KeyReleaseResult{}, "", refuse(ErrInvalid, "invalid digest")
	}
	// The node: registered, this account's, trusted by an operator.
	var owner, pubPEM string
	err := h.cfg.Pool.QueryRow(ctx, `select account_id::text, public_key from nodes where id::text = $1`,
		req.NodeID).Scan(&owner, &pubPEM)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != c.ID) {
		return registryapi.KeyReleaseResult{}, "", refuse(ErrNotFound, "no such node")
	}
	if err != nil {
		return registryapi.KeyReleaseResult{}, "", fmt.Errorf("keyrelease: node: %w", err)
	}
	// The proof that a tenant asked for this load on this node. Spent
	// before anything else can refuse, so that a refused release cannot be
	// retried with the same grant.
	g, err := nodetrust.Redeem(ctx, h.cfg.Pool, req.Grant, registryapi.GrantRequest{NodeID: req.NodeID, Repository: req.Repository, Digest: req.Digest})
	switch {
	case errors.Is(err, nodetrust.ErrNotApproved), errors.Is(err, nodetrust.ErrRevoked):
		return registryapi.KeyReleaseResult{}, "", refuse(ErrNodeUntrusted, "%v", err)
	case errors.Is(err, nodetrust.ErrInvalid):
		return registryapi.KeyReleaseResult{}, "", refuse(ErrGrantInvalid, "%v", err)
	case err != nil:
		return registryapi.KeyReleaseResult{}, "", err
	}
	if (req.TenantID != "" && req.TenantID != g.TenantID) || (req.Tenant != "" && !h.isAccount(ctx, g.TenantID, req.Tenant)) {
		return registryapi.KeyReleaseResult{}, g.ID, refuse(ErrGrantInvalid, "the load grant is for another tenant")
	}
	nodeKey, err := seal.ParsePublicKeyPEM([]byte(pubPEM))
	if err != nil {
		return registryapi.KeyReleaseResult{}, g.ID, fmt.Errorf("keyrelease: node public key: %w", err)
	}
	// The grant's tenant must still be entitled: an entitlement revoked
	// after the grant was issued stops the release.
	_, entitled, err := nodetrust.Entitled(ctx, h.cfg.Pool, g.TenantID, req.Repository, req.Digest)
	if err != nil {
		return registryapi.KeyReleaseResult{}, g.ID, err
	}
	if !entitled {
		return registryapi.KeyReleaseResult{}, g.ID, refuse(ErrForbidden, "the tenant holds no entitlement to this image")
	}
	var state *string
	err = h.cfg.Pool.QueryRow(ctx, `select j.state from validation_jobs j join repositories r on r.id = j.repository_id
		where r.name = $1 and j.manifest_digest = $2`, req.Repository, req.Digest).Scan(&state)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return registryapi.KeyReleaseResult{}, g.ID, fmt.Errorf("keyrelease: validation state: %w", err)
	}
	if state == nil || *state != "available" {
		s := "not validated"
		if state != nil {
			s = *state
		}
		return registryapi.KeyReleaseResult{}, g.ID, refuse(ErrConflict, "the image is not available (validation state %s)", s)
	}
	resp, err := h.wrapKeys(ctx, req, nodeKey)
	return resp, g.ID, err
}

// isAccount reports whether account id is named name.
func (h *Releaser) isAccount(ctx context.Context, id, name string) bool {
	var ok bool
	err := h.cfg.Pool.QueryRow(ctx, `select exists (select 1 from accounts where id = $1::uuid and name = $2)`, id, name).Scan(&ok)
	return err == nil && ok
}

// sealedKey is one entry of hdk seal's keys.json.
type sealedKey struct {
	Chip       string `json:"chip"`
	Layer      string `json:"layer"`
	Plaintext  string `json:"plaintext"`
	KeyID      string `json:"key_id"`
	WrappedKey string `json:"wrapped_key"`
}

func (h *Releaser) wrapKeys(ctx context.Context, req registryapi.KeyRelease, nodeKey *ecdh.PublicKey) (registryapi.KeyReleaseResult, error) {
	m, err := h.cfg.Meta.GetManifest(ctx, req.Repository, req.Digest)
	if err != nil {
		return registryapi.KeyReleaseResult{}, fmt.Errorf("keyrelease: manifest: %w", err)
	}
	mf, err := v1.ParseManifest(strings.NewReader(string(m.Content)))
	if err != nil {
		return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "the image manifest is unreadable")
	}
	var sealed []v1.Hash
	for _, l := range mf.Layers {
		if l.MediaType == image.SealedBitstreamMediaType {
			sealed = append(sealed, l.Digest)
		}
	}
	if len(sealed) == 0 {
		return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "the image is not sealed")
	}
	keys, err := h.keysFile(ctx, req)
	if err != nil {
		return registryapi.KeyReleaseResult{}, err
	}
	var out registryapi.KeyReleaseResult
	for _, layer := range sealed {
		var entry *sealedKey
		for i := range keys {
			if keys[i].Layer == layer.String() {
				entry = &keys[i]
				break
			}
		}
		if entry == nil {
			return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "the registry holds no data key for layer %s", layer)
		}
		raw, err := base64.StdEncoding.DecodeString(entry.WrappedKey)
		if err != nil {
			return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "unreadable data key for layer %s", layer)
		}
		var wk seal.WrappedKey
		if err := wk.UnmarshalBinary(raw); err != nil {
			return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "unreadable data key for layer %s", layer)
		}
		dk, err := seal.UnwrapKey(h.cfg.Recipient, wk)
		if err != nil {
			return registryapi.KeyReleaseResult{}, refuse(ErrConflict, "the data key of layer %s is not sealed to the registry", layer)
		}
		rewrapped, err := seal.WrapKey(nodeKey, dk)
		if err != nil {
			return registryapi.KeyReleaseResult{}, fmt.Errorf("keyrelease: wrapping: %w", err)
		}
		b, err := rewrapped.MarshalBinary()
		if err != nil {
			return registryapi.KeyReleaseResult{}, fmt.Errorf("keyrelease: wrapping: %w", err)
		}
		out.WrappedKeys = append(out.WrappedKeys, registryapi.WrappedKey{Chip: entry.Chip, Layer: layer.String(), KeyID: entry.KeyID,
			WrappedKey: base64.StdEncoding.EncodeToString(b)})
	}
	return out, nil
}

// keysFile reads the newest keys artifact referring to the image.
func (h *Releaser) keysFile(ctx context.Context, req registryapi.KeyRelease) ([]sealedKey, error) {
	refs, err := h.cfg.Meta.Referrers(ctx, req.Repository, req.Digest, KeysArtifactType)
	if err != nil {
		return nil, fmt.Errorf("keyrelease: referrers: %w", err)
	}
	var all []sealedKey
	for i := len(refs) - 1; i >= 0; i-- {
		am, err := h.cfg.Meta.GetManifest(ctx, req.Repository, refs[i].Digest)
		if err != nil {
			return nil, fmt.Errorf("keyrelease: keys artifact: %w", err)
		}
		mf, err := v1.ParseManifest(strings.NewReader(string(am.Content)))
		if err != nil {
			continue
		}
		for _, l := range mf.Layers {
			if l.Size > maxKeysBytes {
				continue
			}
			rc, err := h.cfg.Blobs.Open(ctx, blob.Digest(l.Digest.String()), 0, -1)
			if err != nil {
				return nil, fmt.Errorf("keyrelease: keys artifact: %w", err)
			}
			b, err := io.ReadAll(io.LimitReader(rc, maxKeysBytes))
			rc.Close()
			if err != nil {
				return nil, fmt.Errorf("keyrelease: keys artifact: %w", err)
			}
			var ks []sealedKey
			if json.Unmarshal(b, &ks) == nil {
				all = append(all, ks...)
			}
		}
	}
	if len(all) == 0 {
		return nil, refuse(ErrConflict, "the registry holds no data keys for this image")
	}
	return all, nil
}

// audit records one release or refusal.
func (h *Releaser) audit(ctx context.Context, c Caller, req registryapi.KeyRelease, grantID, outcome string, layers []string) error {
	details, err := json.Marshal(map[string]any{"node_id": req.NodeID, "tenant_id": req.TenantID, "tenant": req.Tenant,
		"repository": req.Repository, "digest": req.Digest, "grant_id": grantID, "layers": layers})
	if err != nil {
		return err
	}
	_, err = h.cfg.Pool.Exec(context.WithoutCancel(ctx), `insert into audit_log
		(actor_id, actor_name, action, target_type, target_id, outcome, request_id, remote_addr, details)
		values (nullif($1, '')::uuid, $2, 'keys.release', 'image', $3, $4, $5, $6, $7)`,
		c.ID, c.Name, req.Repository+"@"+req.Digest, outcome, c.RequestID, c.RemoteAddr, details)
	if err != nil {
		err = fmt.Errorf("keyrelease: audit: %w", err)
		h.cfg.Logger.ErrorContext(ctx, "keyrelease: audit", slog.Any("err", err))
	}
	return err
}
