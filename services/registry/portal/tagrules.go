package portal

import (
	"net/http"
	"net/url"
	"strings"
)

// addTagRule makes the listing repository's tags matching a pattern
// immutable once pushed.
func (p *Portal) addTagRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := p.apiAs(accountOf(r)).AddTagRule(r.Context(), id, strings.TrimSpace(r.PostFormValue("pattern"))); err != nil {
		p.listingFormError(w, r, id, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "rule-added")
}

// deleteTagRule removes a tag rule; the tags of listed versions stay
// immutable.
func (p *Portal) deleteTagRule(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := p.apiAs(accountOf(r)).DeleteTagRule(r.Context(), id, r.PathValue("rule")); err != nil {
		p.listingFormError(w, r, id, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "rule-removed")
}

// listingFormError shows listing id's editor with the API's refusal of a
// form of it; a listing not the ISV's answers as its editor does.
func (p *Portal) listingFormError(w http.ResponseWriter, r *http.Request, id string, err error) {
	f, lerr := p.loadListingForm(r, id)
	if lerr != nil {
		p.fail(w, r, lerr)
		return
	}
	f.Typed = map[string]string{}
	for _, k := range []string{"pattern", "account", "version", "digest"} {
		f.Typed[k] = r.PostFormValue(k)
	}
	p.formError(w, r, f, err)
}
