package api

import (
	"crypto/ecdh"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/nodetrust"
)

// parseNodeKey accepts an X25519 public key as base64 of its 32 bytes or as
// PEM PUBLIC KEY, and returns it as PEM.
func parseNodeKey(text string) (string, error) {
	text = strings.TrimSpace(text)
	var raw []byte
	if strings.HasPrefix(text, "-----BEGIN") {
		block, rest := pem.Decode([]byte(text))
		if block == nil || block.Type != "PUBLIC KEY" || strings.TrimSpace(string(rest)) != "" {
			return "", fieldErr("public_key", "want one PEM PUBLIC KEY block")
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		k, ok := pub.(*ecdh.PublicKey)
		if err != nil || !ok || k.Curve() != ecdh.X25519() {
			return "", fieldErr("public_key", "want an X25519 key")
		}
		raw = k.Bytes()
	} else {
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if b, err := enc.DecodeString(text); err == nil {
				raw = b
				break
			}
		}
	}
	k, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return "", fieldErr("public_key", "want 32 bytes of X25519 public key (base64 or PEM)")
	}
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		return "", fieldErr("public_key", "unusable key")
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

var hostRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,126}[A-Za-z0-9])?$`)

func (a *API) registerNode(c echo.Context, p *principal) error {
	var req registryapi.NodeRegistration
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if !hostRE.MatchString(req.Hostname) {
		return fieldErr("hostname", "want a host name of at most 128 characters")
	}
	pemText, err := parseNodeKey(req.PublicKey)
	if err != nil {
		return err
	}
	n, err := a.st.registerNode(c.Request().Context(), p, req.Hostname, pemText, req.EnrollmentToken)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, n)
}

func (a *API) heartbeat(c echo.Context, p *principal) error {
	var req registryapi.Heartbeat
	if err := a.decode(c, &req); err != nil {
		return err
	}
	var cert string
	if req.Endpoint != "" || req.TLSCertificate != "" {
		if err := parseEndpoint(req.Endpoint); err != nil {
			return err
		}
		var err error
		if cert, err = parseNodeCert(req.TLSCertificate, c.Param("id"), time.Now()); err != nil {
			return err
		}
	}
	if len(req.Boards) > 64 {
		return fieldErr("boards", "at most 64")
	}
	for i, b := range req.Boards {
		if b.Model == "" || len(b.Model) > 64 {
			return fieldErr(fmt.Sprintf("boards[%d].model", i), "required, at most 64 bytes")
		}
		for j, s := range b.Slots {
			if len(s.Part) > 64 {
				return fieldErr(fmt.Sprintf("boards[%d].slots[%d].part", i, j), "at most 64 bytes")
			}
			switch s.State {
			case "cleared", "loading", "loaded", "busy", "failed":
			default:
				return fieldErr(fmt.Sprintf("boards[%d].slots[%d].state", i, j), "want cleared, loading, loaded, busy or failed")
			}
		}
	}
	if req.Boards == nil {
		req.Boards = []registryapi.Board{}
	}
	boards, _ := json.Marshal(req.Boards)
	n, err := a.st.heartbeat(c.Request().Context(), p, c.Param("id"), boards, req.Endpoint, cert)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

// repinNode clears a node's pinned TLS certificate (admin).
func (a *API) repinNode(c echo.Context, p *principal) error {
	n, err := a.st.repinNode(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, n)
}

func (a *API) listNodes(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listNodes(c.Request().Context(), pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Node) cursor { return cursor{x.RegisteredAt, x.ID} }))
}

func (a *API) setNodeTrust(approve bool) func(echo.Context, *principal) error {
	return func(c echo.Context, p *principal) error {
		n, err := a.st.setNodeTrust(c.Request().Context(), p, c.Param("id"), approve)
		if err != nil {
			return err
		}
		return c.JSON(http.StatusOK, n)
	}
}

func (a *API) createEnrollment(c echo.Context, p *principal) error {
	var req registryapi.NewEnrollment
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if req.TTLSeconds < 0 || req.TTLSeconds > int64(nodetrust.MaxEnrollmentTTL/time.Second) {
		return fieldErr("ttl_seconds", "want 0 (default %v) to %d", nodetrust.DefaultEnrollmentTTL, int64(nodetrust.MaxEnrollmentTTL/time.Second))
	}
	e, err := a.st.createEnrollment(c.Request().Context(), p, time.Duration(req.TTLSeconds)*time.Second)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, e)
}

// issueGrant gives a node the right to load one image for the caller: what
// the node presents for the image's data keys and its usage reports.
func (a *API) issueGrant(c echo.Context, p *principal) error {
	var req registryapi.GrantRequest
	if err := a.decode(c, &req); err != nil {
		return err
	}
	switch {
	case !isUUID(req.NodeID):
		return fieldErr("node_id", "want a node id")
	case !repoRE.MatchString(req.Repository):
		return fieldErr("repository", "want a repository name")
	case !digestRE.MatchString(req.Digest):
		return fieldErr("digest", "want sha256:<64 hex> or sha512:<128 hex>")
	}
	g, err := a.st.issueGrant(c.Request().Context(), p, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, g)
}

// listLoads answers the caller's own current loads only, whatever its
// role: nodes and other tenants' loads stay the operator's view.
func (a *API) listLoads(c echo.Context, p *principal) error {
	rows, err := a.st.listLoads(c.Request().Context(), p)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []registryapi.Load{}
	}
	return c.JSON(http.StatusOK, registryapi.Items[registryapi.Load]{Items: rows})
}
