package portal

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

type tokensPage struct {
	formRefusal
	Tokens  []registryapi.Token
	Created *registryapi.Token
	// Name and Days are the form's values as typed, after a refusal.
	Name, Days string
}

func (tokensPage) title() string { return "API tokens" }
func (tokensPage) nav() string   { return "tokens" }

func (p *Portal) tokens(w http.ResponseWriter, r *http.Request) {
	pg := tokensPage{}
	if s, ok := p.takeSecret(w, r); ok {
		pg.Created = &registryapi.Token{Name: s.Name, Secret: s.Secret}
	}
	p.showTokens(w, r, http.StatusOK, pg)
}

func (p *Portal) showTokens(w http.ResponseWriter, r *http.Request, status int, pg tokensPage) {
	res, err := p.apiAs(accountOf(r)).Tokens(r.Context(), url.Values{"limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Tokens = res.Items
	p.render(w, r, status, pageTokens, pg)
}

func (p *Portal) createToken(w http.ResponseWriter, r *http.Request) {
	req := registryapi.NewToken{Name: strings.TrimSpace(r.PostFormValue("name"))}
	typed := tokensPage{Name: req.Name, Days: strings.TrimSpace(r.PostFormValue("days"))}
	if d := typed.Days; d != "" {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 || n > 3650 {
			typed.formRefusal = refused(&fieldError{"days", "give a whole number of days from 1 to 3650, or leave it empty"})
			p.showTokens(w, r, http.StatusUnprocessableEntity, typed)
			return
		}
		t := time.Now().Add(time.Duration(n) * 24 * time.Hour).UTC()
		req.ExpiresAt = &t
	}
	tok, err := p.apiAs(accountOf(r)).CreateToken(r.Context(), req)
	if ae, ok := apiRefusal(err); ok && ae.Status < 500 && ae.Status != http.StatusUnauthorized {
		typed.formRefusal = refused(err)
		p.showTokens(w, r, ae.Status, typed)
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	if err := p.setSecret(w, r, tok.Name, tok.Secret); err != nil {
		p.fail(w, r, err)
		return
	}
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
}

func (p *Portal) revokeToken(w http.ResponseWriter, r *http.Request) {
	if err := p.apiAs(accountOf(r)).RevokeToken(r.Context(), r.PathValue("id")); err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/tokens", "revoked")
}
