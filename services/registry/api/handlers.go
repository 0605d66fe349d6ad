package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
)

func (a *API) me(c echo.Context, p *principal) error {
	return c.JSON(http.StatusOK, registryapi.Account{ID: p.ID, Name: p.Name, Role: string(p.Role), Disabled: p.Disabled, CreatedAt: p.CreatedAt})
}

var nameRE = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*$`)

func (a *API) createAccount(c echo.Context, p *principal) error {
	var req registryapi.NewAccount
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if len(req.Name) > 64 || !nameRE.MatchString(req.Name) {
		return fieldErr("name", "want lower-case letters and digits separated by . _ or -, at most 64")
	}
	if !auth.Role(req.Role).Valid() {
		return fieldErr("role", "want isv, tenant, admin or node")
	}
	if len(req.Password) > auth.MaxPasswordLen || strings.HasPrefix(req.Password, auth.TokenPrefix) {
		return fieldErr("password", "at most %d bytes, not starting with %q", auth.MaxPasswordLen, auth.TokenPrefix)
	}
	acct, err := a.st.createAccount(c.Request().Context(), p, req.Name, auth.Role(req.Role), req.Password)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, acct)
}

func (a *API) listAccounts(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	role := c.QueryParam("role")
	if role != "" && !auth.Role(role).Valid() {
		return fieldErr("role", "want isv, tenant, admin or node")
	}
	rows, err := a.st.listAccounts(c.Request().Context(), pg, role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Account) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) createToken(c echo.Context, p *principal) error {
	var req registryapi.NewToken
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if len(req.Name) > 128 {
		return fieldErr("name", "at most 128 bytes")
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		return fieldErr("expires_at", "must be in the future")
	}
	t, err := a.st.issueToken(c.Request().Context(), p, req.Name, req.ExpiresAt)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func (a *API) listTokens(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listTokens(c.Request().Context(), p.ID, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Token) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) revokeToken(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: token", ErrNotFound)
	}
	if err := a.st.revokeToken(c.Request().Context(), p, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// parseSigningKey checks a PEM ECDSA P-256 public key and returns its
// canonical PEM and key id.
func parseSigningKey(text string) (pemText, keyID string, err error) {
	block, rest := pem.Decode([]byte(text))
	if block == nil || block.Type != "PUBLIC KEY" || strings.TrimSpace(string(rest)) != "" {
		return "", "", fieldErr("public_key", "want one PEM PUBLIC KEY block")
	}
	pub, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return "", "", fieldErr("public_key", "not a PKIX public key")
	}
	ec, ok := pub.(*ecdsa.PublicKey)
	if !ok || ec.Curve != elliptic.P256() {
		return "", "", fieldErr("public_key", "want an ECDSA P-256 key")
	}
	der, err := x509.MarshalPKIXPublicKey(ec)
	if err != nil {
		return "", "", fieldErr("public_key", "unusable key")
	}
	sum := sha256.Sum256(der)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "sha256:" + hex.EncodeToString(sum[:]), nil
}

func (a *API) createKey(c echo.Context, p *principal) error {
	var req registryapi.NewSigningKey
	if err := a.decode(c, &req); err != nil {
		return err
	}
	pemText, keyID, err := parseSigningKey(req.PublicKey)
	if err != nil {
		return err
	}
	k, err := a.st.addKey(c.Request().Context(), p, keyID, "ecdsa-p256-sha256", pemText)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, k)
}

func (a *API) listKeys(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	account := p.ID
	if p.is(admin) {
		account = c.QueryParam("account_id")
	}
	rows, err := a.st.listKeys(c.Request().Context(), account, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.SigningKey) cursor { return cursor{x.CreatedAt, x.ID} }))
}

// repositoryKeys lists the unrevoked signing keys of the ISV that owns a
// repository. Public keys are not secret, so any account may ask; a node
// needs them to check the ISV signature at every load, which is how a
// revocation takes effect on nodes.
func (a *API) repositoryKeys(c echo.Context, p *principal) error {
	repo := c.QueryParam("repository")
	if len(repo) > 255 || !repoRE.MatchString(repo) {
		return fieldErr("repository", "want a repository name")
	}
	rk, err := a.st.repositoryKeys(c.Request().Context(), repo)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, rk)
}

// releaseKeys hands a node the data keys of a sealed image, wrapped to the
// node's key, against a tenant's load grant (package keyrelease).
func (a *API) releaseKeys(c echo.Context, p *principal) error {
	if a.cfg.KeyRelease == nil {
		return fmt.Errorf("%w: this registry releases no keys", ErrNotFound)
	}
	caller := callerOf(p)
	var req registryapi.KeyRelease
	if err := a.decode(c, &req); err != nil {
		a.cfg.KeyRelease.RecordRefusal(c.Request().Context(), caller, "malformed request")
		return err
	}
	res, err := a.cfg.KeyRelease.Release(c.Request().Context(), caller, req)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, res)
}

// keyReleaseRefused records an account of another role asking for keys:
// the audit log holds every attempt at a key release.
func (a *API) keyReleaseRefused(c echo.Context, p *principal, reason string) {
	if a.cfg.KeyRelease != nil {
		a.cfg.KeyRelease.RecordRefusal(c.Request().Context(), callerOf(p), reason)
	}
}

func callerOf(p *principal) keyrelease.Caller {
	return keyrelease.Caller{ID: p.ID, Name: p.Name, Role: p.Role, RequestID: p.requestID, RemoteAddr: p.remote}
}

func (a *API) revokeKey(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: signing key", ErrNotFound)
	}
	k, err := a.st.revokeKey(c.Request().Context(), p, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, k)
}

var (
	repoRE     = regexp.MustCompile(`^[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	versionRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$`)
	digestRE   = regexp.MustCompile(`^(sha256:[a-f0-9]{64}|sha512:[a-f0-9]{128})$`)
)

func (a *API) reportUsage(c echo.Context, p *principal) error {
	var req registryapi.UsageReport
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if !isUUID(req.NodeID) {
		return fieldErr("node_id", "want a node id")
	}
	if len(req.Records) == 0 || len(req.Records) > registryapi.MaxUsageRecords {
		return fieldErr("records", "want 1 to %d records", registryapi.MaxUsageRecords)
	}
	for i, r := range req.Records {
		f := func(n string) string { return fmt.Sprintf("records[%d].%s", i, n) }
		switch {
		case r.ReportID == "" || len(r.ReportID) > 128:
			return fieldErr(f("report_id"), "required, at most 128 bytes")
		case !isUUID(r.TenantID):
			return fieldErr(f("tenant_id"), "want an account id")
		case !isUUID(r.GrantID):
			return fieldErr(f("grant_id"), "want the id of the load grant the load was made under")
		case r.ListingID != nil && !isUUID(*r.ListingID):
			return fieldErr(f("listing_id"), "want a listing id")
		case r.ManifestDigest != nil && !digestRE.MatchString(*r.ManifestDigest):
			return fieldErr(f("digest"), "malformed")
		case r.Event != "load" && r.Event != "clear" && r.Event != "busy":
			return fieldErr(f("event"), "want load, clear or busy")
		case r.BusyNs < 0:
			return fieldErr(f("busy_ns"), "must not be negative")
		case r.Slot != nil && (*r.Slot < 0 || *r.Slot > 1024):
			return fieldErr(f("slot"), "out of range")
		case len(r.Board) > 64:
			return fieldErr(f("board"), "at most 64 bytes")
		}
	}
	n, err := a.st.recordUsage(c.Request().Context(), p, req.NodeID, req.Records)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, registryapi.UsageAccepted{Accepted: n, Duplicates: len(req.Records) - n})
}

func parseTime(c echo.Context, name string) (*time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fieldErr(name, "want an RFC 3339 time")
	}
	return &t, nil
}

func (a *API) usageSummary(c echo.Context, p *principal) error {
	from, err := parseTime(c, "from")
	if err != nil {
		return err
	}
	to, err := parseTime(c, "to")
	if err != nil {
		return err
	}
	listing := c.QueryParam("listing_id")
	var perDay bool
	switch c.QueryParam("by") {
	case "":
	case "day":
		perDay = true
	default:
		return fieldErr("by", "want day, or leave it out")
	}
	rows, err := a.st.usageSummary(c.Request().Context(), p, from, to, listing, perDay)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []registryapi.UsageSummary{}
	}
	var total int64
	for _, r := range rows {
		total += r.TotalMicros
	}
	return c.JSON(http.StatusOK, registryapi.UsageSummaries{Items: rows, TotalMicros: total})
}

func (a *API) listAudit(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	f := auditFilter{action: c.QueryParam("action"), targetType: c.QueryParam("target_type"),
		targetID: c.QueryParam("target_id"), actor: c.QueryParam("actor")}
	for _, v := range []struct{ name, v string }{{"action", f.action}, {"target_type", f.targetType}, {"target_id", f.targetID}, {"actor", f.actor}} {
		if len(v.v) > 256 {
			return fieldErr(v.name, "at most 256 bytes")
		}
	}
	rows, err := a.st.listAudit(c.Request().Context(), p, f, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.AuditEntry) cursor { return cursor{ID: fmt.Sprint(x.ID)} }))
}
