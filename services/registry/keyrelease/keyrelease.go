// Package keyrelease is the registry's key-release endpoint,
// POST /api/v1/keys/release, by which a registered node
// obtains the data keys of a sealed image for a tenant, wrapped to that
// node's X25519 public key only.
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
// authenticated like /api/v1 (HTTP Basic with password or API token, or
// Bearer faas_… token) as an account of role node. grant is a load grant
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
	"net/http"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/clientip"
	"github.com/fpga-faas/faas/services/registry/meta"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// Path is where the endpoint is mounted.
const Path = registryapi.Prefix + registryapi.KeyReleasePath

// KeysArtifactType is the artifactType of the side artifact that carries an
// image's keys.json (hdk seal output) to the registry.
const KeysArtifactType = image.KeysArtifactType

const maxKeysBytes = 1 << 20

// Config configures the handler; Pool, Accounts, Meta, Blobs and Recipient
// are required.
type Config struct {
	Pool      *pgxpool.Pool
	Accounts  *auth.Store
	Meta      *meta.Store
	Blobs     blob.Store
	Recipient *ecdh.PrivateKey // the platform's X25519 key ISVs seal to
	// RequestID returns the request id of a request context, for the
	// audit log; nil: the X-Request-Id header.
	RequestID func(context.Context) string
	Logger    *slog.Logger
}

// Handler serves POST Path.
type Handler struct{ cfg Config }

// New returns the handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Pool == nil || cfg.Accounts == nil || cfg.Meta == nil || cfg.Blobs == nil || cfg.Recipient == nil {
		return nil, errors.New("keyrelease: Config needs Pool, Accounts, Meta, Blobs and Recipient")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Handler{cfg: cfg}, nil
}

// refusal is an HTTP error answer.
type refusal struct {
	status     int
	code       string
	msg        string
	retryAfter int // seconds; 0: no Retry-After
}

func (r *refusal) Error() string { return r.msg }

func refuse(status int, code, format string, args ...any) *refusal {
	return &refusal{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

// retryLater is the refusal of an auth.RetryError.
func retryLater(err error, status int, code, msg string) *refusal {
	rf := refuse(status, code, "%s", msg)
	rf.retryAfter, _ = auth.RetryAfter(err)
	return rf
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeErr(w http.ResponseWriter, r *refusal) {
	if r.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="faas-registry", charset="UTF-8"`)
	}
	if r.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(r.retryAfter))
	}
	writeJSON(w, r.status, map[string]any{"error": map[string]string{"code": r.code, "message": r.msg}})
}

// failure is the answer to err, which is no refusal: 503 with
// Retry-After and the cause when the database cannot serve requests for
// now (meta.ErrUnavailable; faasd retries the release), else 500. Either
// is logged with what, never shown to the caller beyond the cause.
func (h *Handler) failure(ctx context.Context, what string, err error) *refusal {
	err = meta.Unavailable(err)
	if cause, ok := meta.Cause(err); ok {
		h.cfg.Logger.WarnContext(ctx, what+": database unavailable", slog.Any("err", err))
		rf := refuse(http.StatusServiceUnavailable, "unavailable", "%s", meta.UnavailableMessage(cause))
		rf.retryAfter = int(meta.RetryAfter / time.Second)
		return rf
	}
	h.cfg.Logger.ErrorContext(ctx, what, slog.Any("err", err))
	return refuse(http.StatusInternalServerError, "internal", "internal error")
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		writeErr(w, refuse(http.StatusNotFound, "not_found", "not found"))
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeErr(w, refuse(http.StatusMethodNotAllowed, "invalid", "method not allowed"))
		return
	}
	ctx := r.Context()
	acct, err := h.authenticate(r)
	if err != nil {
		var rf *refusal
		if errors.As(err, &rf) {
			writeErr(w, rf)
			return
		}
		writeErr(w, h.failure(ctx, "keyrelease: authentication", err))
		return
	}
	var req registryapi.KeyRelease
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		h.audit(ctx, r, acct, req, "", "denied: malformed request", nil)
		writeErr(w, refuse(http.StatusBadRequest, "invalid", "malformed request body: %v", err))
		return
	}
	resp, grantID, err := h.release(ctx, acct, req)
	if err != nil {
		var rf *refusal
		if !errors.As(err, &rf) {
			rf = h.failure(ctx, "keyrelease", err)
		}
		h.audit(ctx, r, acct, req, grantID, "denied: "+rf.msg, nil)
		writeErr(w, rf)
		return
	}
	layers := make([]string, len(resp.WrappedKeys))
	for i, k := range resp.WrappedKeys {
		layers[i] = k.Layer
	}
	if err := h.audit(ctx, r, acct, req, grantID, "ok", layers); err != nil {
		// No audit record, no key.
		writeErr(w, h.failure(ctx, "keyrelease: audit", err))
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) authenticate(r *http.Request) (auth.Account, error) {
	acct, err := h.cfg.Accounts.AuthenticateRequest(r)
	switch {
	case err == nil && acct == nil:
		return auth.Account{}, refuse(http.StatusUnauthorized, "unauthenticated", "authentication required")
	case errors.Is(err, auth.ErrUnauthenticated):
		return auth.Account{}, refuse(http.StatusUnauthorized, "unauthenticated", "%s", auth.Reason(err))
	case errors.Is(err, auth.ErrRateLimited):
		return auth.Account{}, retryLater(err, http.StatusTooManyRequests, "rate_limited", "too many failed login attempts, try again later")
	case errors.Is(err, auth.ErrBusy):
		return auth.Account{}, retryLater(err, http.StatusServiceUnavailable, "unavailable", "too many logins at once, try again later")
	case err != nil:
		return auth.Account{}, err
	}
	return *acct, nil
}

func (h *Handler) release(ctx context.Context, acct auth.Account, req registryapi.KeyRelease) (registryapi.KeyReleaseResult, string, error) {
	if acct.Role != auth.RoleNode {
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusForbidden, "forbidden", "only node accounts may ask for keys")
	}
	if req.NodeID == "" || req.Repository == "" || req.Digest == "" || req.Grant == "" {
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusBadRequest, "invalid", "node_id, repository, digest and grant are required")
	}
	if _, err := blob.ParseDigest(req.Digest); err != nil {
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusBadRequest, "invalid", "invalid digest")
	}
	// The node: registered, this account's, trusted by an operator.
	var owner, pubPEM string
	err := h.cfg.Pool.QueryRow(ctx, `select account_id::text, public_key from nodes where id::text = $1`,
		req.NodeID).Scan(&owner, &pubPEM)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && owner != acct.ID) {
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusNotFound, "not_found", "no such node")
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
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusForbidden, "node_untrusted", "%v", err)
	case errors.Is(err, nodetrust.ErrInvalid):
		return registryapi.KeyReleaseResult{}, "", refuse(http.StatusForbidden, "grant_invalid", "%v", err)
	case err != nil:
		return registryapi.KeyReleaseResult{}, "", err
	}
	if (req.TenantID != "" && req.TenantID != g.TenantID) || (req.Tenant != "" && !h.isAccount(ctx, g.TenantID, req.Tenant)) {
		return registryapi.KeyReleaseResult{}, g.ID, refuse(http.StatusForbidden, "grant_invalid", "the load grant is for another tenant")
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
		return registryapi.KeyReleaseResult{}, g.ID, refuse(http.StatusForbidden, "forbidden", "the tenant holds no entitlement to this image")
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
		return registryapi.KeyReleaseResult{}, g.ID, refuse(http.StatusConflict, "conflict", "the image is not available (validation state %s)", s)
	}
	resp, err := h.wrapKeys(ctx, req, nodeKey)
	return resp, g.ID, err
}

// isAccount reports whether account id is named name.
func (h *Handler) isAccount(ctx context.Context, id, name string) bool {
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

func (h *Handler) wrapKeys(ctx context.Context, req registryapi.KeyRelease, nodeKey *ecdh.PublicKey) (registryapi.KeyReleaseResult, error) {
	m, err := h.cfg.Meta.GetManifest(ctx, req.Repository, req.Digest)
	if err != nil {
		return registryapi.KeyReleaseResult{}, fmt.Errorf("keyrelease: manifest: %w", err)
	}
	mf, err := v1.ParseManifest(strings.NewReader(string(m.Content)))
	if err != nil {
		return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "the image manifest is unreadable")
	}
	var sealed []v1.Hash
	for _, l := range mf.Layers {
		if l.MediaType == image.SealedBitstreamMediaType {
			sealed = append(sealed, l.Digest)
		}
	}
	if len(sealed) == 0 {
		return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "the image is not sealed")
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
			return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "the registry holds no data key for layer %s", layer)
		}
		raw, err := base64.StdEncoding.DecodeString(entry.WrappedKey)
		if err != nil {
			return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "unreadable data key for layer %s", layer)
		}
		var wk seal.WrappedKey
		if err := wk.UnmarshalBinary(raw); err != nil {
			return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "unreadable data key for layer %s", layer)
		}
		dk, err := seal.UnwrapKey(h.cfg.Recipient, wk)
		if err != nil {
			return registryapi.KeyReleaseResult{}, refuse(http.StatusConflict, "conflict", "the data key of layer %s is not sealed to the registry", layer)
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
func (h *Handler) keysFile(ctx context.Context, req registryapi.KeyRelease) ([]sealedKey, error) {
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
		return nil, refuse(http.StatusConflict, "conflict", "the registry holds no data keys for this image")
	}
	return all, nil
}

// audit records one release or refusal.
func (h *Handler) audit(ctx context.Context, r *http.Request, acct auth.Account, req registryapi.KeyRelease, grantID, outcome string, layers []string) error {
	rid := ""
	if h.cfg.RequestID != nil {
		rid = h.cfg.RequestID(ctx)
	}
	if rid == "" {
		rid = r.Header.Get("X-Request-Id")
	}
	details, err := json.Marshal(map[string]any{"node_id": req.NodeID, "tenant_id": req.TenantID, "tenant": req.Tenant,
		"repository": req.Repository, "digest": req.Digest, "grant_id": grantID, "layers": layers})
	if err != nil {
		return err
	}
	_, err = h.cfg.Pool.Exec(context.WithoutCancel(ctx), `insert into audit_log
		(actor_id, actor_name, action, target_type, target_id, outcome, request_id, remote_addr, details)
		values (nullif($1, '')::uuid, $2, 'keys.release', 'image', $3, $4, $5, $6, $7)`,
		acct.ID, acct.Name, req.Repository+"@"+req.Digest, outcome, rid, clientip.String(clientip.FromRequest(r)), details)
	if err != nil {
		err = fmt.Errorf("keyrelease: audit: %w", err)
		h.cfg.Logger.ErrorContext(ctx, "keyrelease: audit", slog.Any("err", err))
	}
	return err
}
