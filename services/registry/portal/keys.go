package portal

import (
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

type keysPage struct {
	formRefusal
	Keys  []registryapi.SigningKey
	Added *registryapi.SigningKey
	PEM   string
}

func (keysPage) title() string { return "Signing keys" }
func (keysPage) nav() string   { return "isv" }

// maxKeyPEM bounds a pasted or uploaded public key.
const maxKeyPEM = 16 << 10

func (p *Portal) keys(w http.ResponseWriter, r *http.Request) {
	p.showKeys(w, r, http.StatusOK, keysPage{})
}

// added is the key the form just registered, named by the redirect after
// it (a reload of that page registers nothing).
func added(r *http.Request, keys []registryapi.SigningKey) *registryapi.SigningKey {
	id := r.URL.Query().Get("added")
	if id == "" {
		return nil
	}
	for i := range keys {
		if keys[i].ID == id {
			return &keys[i]
		}
	}
	return nil
}

func (p *Portal) showKeys(w http.ResponseWriter, r *http.Request, status int, pg keysPage) {
	res, err := p.apiAs(accountOf(r)).SigningKeys(r.Context(), url.Values{"limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Keys = res.Items
	if r.Method == http.MethodGet {
		pg.Added = added(r, pg.Keys)
	}
	p.render(w, r, status, pageKeys, pg)
}

// addKey registers a public key pasted into the form or uploaded as a
// file (isv.pub); the form is multipart so that both work without script.
func (p *Portal) addKey(w http.ResponseWriter, r *http.Request) {
	pemText := strings.TrimSpace(r.FormValue("pem"))
	if f, _, err := r.FormFile("file"); err == nil {
		b, err := io.ReadAll(io.LimitReader(f, maxKeyPEM+1))
		f.Close()
		if err != nil {
			p.fail(w, r, err)
			return
		}
		if len(b) > maxKeyPEM {
			p.showKeys(w, r, http.StatusRequestEntityTooLarge, keysPage{formRefusal: formRefusal{Error: "The key file is too large to be a public key."}})
			return
		}
		if s := strings.TrimSpace(string(b)); s != "" {
			pemText = s
		}
	}
	if pemText == "" {
		p.showKeys(w, r, http.StatusUnprocessableEntity, keysPage{formRefusal: refused(&fieldError{"pem", "paste a PEM public key or choose the isv.pub file hdk keygen wrote"})})
		return
	}
	k, err := p.apiAs(accountOf(r)).AddSigningKey(r.Context(), pemText)
	if ae, ok := apiRefusal(err); ok && ae.Status < 500 && ae.Status != http.StatusUnauthorized {
		p.showKeys(w, r, ae.Status, keysPage{formRefusal: refused(err), PEM: pemText})
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/isv/keys?added="+url.QueryEscape(k.ID), http.StatusSeeOther)
}

func (p *Portal) revokeKey(w http.ResponseWriter, r *http.Request) {
	if _, err := p.apiAs(accountOf(r)).RevokeSigningKey(r.Context(), r.PathValue("id")); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/isv/keys", "key-revoked")
}
