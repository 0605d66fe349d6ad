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
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/keyrelease"
	"github.com/labstack/echo/v4"
)

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
