package api

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// putLogo sets a listing's logo from the raw body. The caller's right to
// the listing is checked before a byte of the body is read or decoded, so
// that no one but its owner makes the registry decode images for it.
func (a *API) putLogo(c echo.Context, p *principal) error {
	ctx, id := c.Request().Context(), c.Param("id")
	if _, err := a.st.managedListing(ctx, a.st.db, p, id); err != nil {
		return err
	}
	ctype := c.Request().Header.Get("Content-Type")
	if !logoType(ctype) {
		_, err := decodeLogo(ctype, nil) // its refusal names the types
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, registryapi.MaxLogoBytes))
	if err != nil {
		return err
	}
	lg, err := decodeLogo(ctype, data)
	if err != nil {
		return err
	}
	l, err := a.st.setLogo(ctx, p, id, lg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, l)
}

func (a *API) deleteLogo(c echo.Context, p *principal) error {
	if err := a.st.deleteLogo(c.Request().Context(), p, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// getLogo serves a listing's logo: always the PNG the registry made,
// under nosniff and a CSP that lets nothing run, with its digest as ETag.
// A logo anyone may see (the listing is published and public) may be
// cached by anyone for a while; another only by the caller's browser, and
// checked again each time.
func (a *API) getLogo(c echo.Context, p *principal) error {
	lg, public, err := a.st.getLogo(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	h := c.Response().Header()
	etag := `"` + lg.digest + `"`
	h.Set("ETag", etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("Cache-Control", "private, no-cache")
	if public {
		h.Set("Cache-Control", "public, max-age=300")
	}
	if inm := c.Request().Header.Get("If-None-Match"); inm != "" && (inm == "*" || strings.Contains(inm, etag)) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, "image/png", lg.png)
}

// putDocs sets a version's documentation.
func (a *API) putDocs(c echo.Context, p *principal) error {
	var req registryapi.NewVersionDocs
	if err := a.decode(c, &req); err != nil {
		return err
	}
	switch {
	case len(req.Markdown) > registryapi.MaxDocsBytes:
		return fieldErr("markdown", "%d bytes, want at most %d", len(req.Markdown), registryapi.MaxDocsBytes)
	case !utf8.ValidString(req.Markdown) || strings.ContainsRune(req.Markdown, 0):
		return fieldErr("markdown", "want UTF-8 text without NUL characters")
	}
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	if !versionRE.MatchString(c.Param("version")) {
		return fmt.Errorf("%w: the listing has no version %q", ErrNotFound, c.Param("version"))
	}
	d, err := a.st.setDocs(c.Request().Context(), p, c.Param("id"), c.Param("version"), req.Markdown)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (a *API) getDocs(c echo.Context, p *principal) error {
	if !versionRE.MatchString(c.Param("version")) {
		return fmt.Errorf("%w: the listing has no version %q", ErrNotFound, c.Param("version"))
	}
	d, err := a.st.getDocs(c.Request().Context(), p, c.Param("id"), c.Param("version"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}
