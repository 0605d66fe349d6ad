package portal

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/fpga-faas/faas/services/registry/auth"
)

type signinPage struct {
	CSRF, Next, Name, Error string
}

func (signinPage) title() string { return "Sign in" }

// maxSigninField bounds the sign-in form's fields (names are short;
// passwords are capped by the registry's own limit too).
const maxSigninField = 1024

func (p *Portal) signinForm(w http.ResponseWriter, r *http.Request) {
	next := r.URL.Query().Get("next")
	if se := sessionOf(r); se != nil {
		http.Redirect(w, r, landing(se.account.Role, next), http.StatusSeeOther)
		return
	}
	p.showSignin(w, r, http.StatusOK, signinPage{Next: next})
}

// showSignin renders the form with a fresh double-submit token.
func (p *Portal) showSignin(w http.ResponseWriter, r *http.Request, status int, pg signinPage) {
	tok, err := randomToken()
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.setCookie(w, p.signinCookie(), tok, 0)
	pg.CSRF = tok
	if !localPath(pg.Next) {
		pg.Next = ""
	}
	p.render(w, r, status, pageSignin, pg)
}

func (p *Portal) signin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4*maxSigninField)
	if err := r.ParseForm(); err != nil {
		p.showSignin(w, r, http.StatusBadRequest, signinPage{Error: "The form could not be read."})
		return
	}
	name, pass, next := r.PostForm.Get("name"), r.PostForm.Get("password"), r.PostForm.Get("next")
	c, err := r.Cookie(p.signinCookie())
	if err != nil || c.Value == "" || !(&session{csrf: c.Value}).validCSRF(r.PostForm.Get("csrf")) {
		p.showSignin(w, r, http.StatusForbidden, signinPage{Next: next, Name: name,
			Error: "This form is out of date or did not come from this site. Try again."})
		return
	}
	if len(name) > maxSigninField || len(pass) > maxSigninField {
		p.showSignin(w, r, http.StatusBadRequest, signinPage{Next: next, Error: "Name or password too long."})
		return
	}
	acct, err := p.cfg.Accounts.Authenticate(r.Context(), name, pass)
	switch {
	case errors.Is(err, auth.ErrRateLimited), errors.Is(err, auth.ErrBusy):
		msg := "Too many sign-ins at once. Try again in a moment."
		if errors.Is(err, auth.ErrRateLimited) {
			msg = "Too many failed attempts."
		}
		if s, ok := auth.RetryAfter(err); ok {
			w.Header().Set("Retry-After", strconv.Itoa(s))
			msg += " Try again in " + waitWords(s) + "."
		}
		p.showSignin(w, r, http.StatusTooManyRequests, signinPage{Next: next, Name: name, Error: msg})
		return
	case errors.Is(err, auth.ErrUnauthenticated) || (err == nil && acct.Disabled):
		p.showSignin(w, r, http.StatusUnauthorized, signinPage{Next: next, Name: name,
			Error: "Wrong account name or password."})
		return
	case err != nil:
		p.fail(w, r, err)
		return
	}
	if acct.Role == auth.RoleNode {
		p.showSignin(w, r, http.StatusForbidden, signinPage{Next: next, Name: name,
			Error: "Node accounts cannot sign in to the portal."})
		return
	}
	id, _, err := p.sessions.create(r.Context(), acct)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.clearCookie(w, p.signinCookie())
	p.setCookie(w, p.cookieName(), id, p.cfg.SessionTTL)
	http.Redirect(w, r, landing(acct.Role, next), http.StatusSeeOther)
}

// homes are the pages each role starts from; the marketplace for any
// other.
var homes = map[auth.Role]string{auth.RoleISV: "/isv", auth.RoleTenant: "/my", auth.RoleAdmin: "/admin"}

// landing is where sign-in sends role: back to the page it came from when
// that is one of ours, else the role's home page.
func landing(role auth.Role, next string) string {
	if localPath(next) {
		return next
	}
	if h, ok := homes[role]; ok {
		return h
	}
	return "/"
}

// waitWords says a wait of s seconds as people read it: whole seconds
// under two minutes (the lockouts start at one second and double), whole
// minutes, rounded up, beyond.
func waitWords(s int) string {
	switch {
	case s == 1:
		return "1 second"
	case s < 120:
		return strconv.Itoa(s) + " seconds"
	}
	return strconv.Itoa((s+59)/60) + " minutes"
}

func (p *Portal) signout(w http.ResponseWriter, r *http.Request) {
	if err := p.sessions.end(r.Context(), sessionOf(r)); err != nil {
		p.fail(w, r, err)
		return
	}
	p.clearCookie(w, p.cookieName())
	p.redirectFlash(w, r, "/", "signed-out")
}
