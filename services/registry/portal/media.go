package portal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// listingLogo serves a listing's logo to whoever may see the listing, as
// the API does: the PNG the registry made, never what was uploaded. The
// pages link here rather than to the API, which knows nothing of the
// portal's session, so that an ISV sees the logo of its draft too.
func (p *Portal) listingLogo(w http.ResponseWriter, r *http.Request) {
	b, err := p.apiAs(accountOf(r)).Logo(r.Context(), r.PathValue("id"))
	if err != nil {
		p.fail(w, r, err)
		return
	}
	sum := sha256.Sum256(b)
	etag := `"sha256:` + hex.EncodeToString(sum[:]) + `"`
	h := w.Header()
	h.Set("Content-Type", "image/png")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", etag)
	// The pages add the digest to the address, so a new logo is a new
	// address; checked again anyway, since a draft's is the ISV's alone.
	h.Set("Cache-Control", "private, no-cache")
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(b)
}

// uploadLogo sets a listing's logo from the editor's file field "logo"
// (the form is multipart; the server bounds its body). The API checks and
// re-encodes it; its refusal is shown on the field.
func (p *Portal) uploadLogo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	data, ctype, err := readLogo(r)
	if err == nil {
		_, err = p.apiAs(accountOf(r)).SetLogo(r.Context(), id, ctype, data)
	}
	if ae, ok := apiRefusal(err); ok && ae.Field == "" &&
		(ae.Status == http.StatusUnsupportedMediaType || ae.Status == http.StatusRequestEntityTooLarge) {
		err = &fieldError{"logo", ae.Message}
	}
	if err != nil {
		p.listingFormError(w, r, id, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "logo-set")
}

// readLogo reads the form's file and the type it is sent as: the type the
// browser gave it, or when that is none of registryapi.LogoTypes (some
// send application/octet-stream) the one its first bytes show, if it is
// one. The API decodes it as that type and refuses what it is not.
func readLogo(r *http.Request) ([]byte, string, error) {
	f, hdr, err := r.FormFile("logo")
	if err != nil {
		return nil, "", &fieldError{"logo", "choose a PNG, JPEG or WebP file"}
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, registryapi.MaxLogoBytes+1))
	if err != nil {
		return nil, "", fmt.Errorf("portal: reading the logo: %w", err)
	}
	if len(data) > registryapi.MaxLogoBytes {
		return nil, "", &fieldError{"logo", fmt.Sprintf("%s is larger than %s", hdr.Filename, humanBytes(registryapi.MaxLogoBytes))}
	}
	ctype := hdr.Header.Get("Content-Type")
	if mt, _, _ := mime.ParseMediaType(ctype); !slices.Contains(registryapi.LogoTypes, mt) {
		if sniffed := http.DetectContentType(data); slices.Contains(registryapi.LogoTypes, sniffed) {
			ctype = sniffed
		}
	}
	return data, ctype, nil
}

// deleteLogo removes a listing's logo.
func (p *Portal) deleteLogo(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := p.apiAs(accountOf(r)).DeleteLogo(r.Context(), id); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "logo-removed")
}

// saveDocs sets a version's documentation from the version page's form.
func (p *Portal) saveDocs(w http.ResponseWriter, r *http.Request) {
	id, version := r.PathValue("id"), r.PathValue("version")
	md := strings.ReplaceAll(r.PostFormValue("markdown"), "\r\n", "\n")
	if _, err := p.apiAs(accountOf(r)).SetVersionDocs(r.Context(), id, version, md); err != nil {
		ae, ok := apiRefusal(err)
		if !ok || ae.Status >= 500 || ae.Status == http.StatusNotFound || ae.Status == http.StatusUnauthorized {
			p.fail(w, r, err)
			return
		}
		p.renderVersion(w, r, id, version, func(pg *versionPage) {
			pg.Docs, pg.formRefusal = md, refused(err)
		}, ae.Status)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id)+"/versions/"+url.PathEscape(version), "docs-saved")
}
