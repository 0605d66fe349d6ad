package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/hdk/validate"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// listingRow is a listing with its versions, for the dashboard.
type listingRow struct {
	registryapi.Listing
	Versions []versionView
}

type versionView struct {
	registryapi.Version
	Findings []finding
}

// finding is a validation finding with its code's explanation.
type finding struct {
	validate.Finding
	Meaning string
}

func meaning(c validate.Code) string {
	for _, ci := range codes {
		if ci.Code == string(c) {
			return ci.Meaning
		}
	}
	return ""
}

func viewOf(v registryapi.Version) versionView {
	vv := versionView{Version: v}
	var fs []validate.Finding
	if len(v.Reasons) > 0 && json.Unmarshal(v.Reasons, &fs) == nil {
		for _, f := range fs {
			vv.Findings = append(vv.Findings, finding{Finding: f, Meaning: meaning(f.Code)})
		}
	}
	return vv
}

type dashboardPage struct {
	Listings []listingRow
	Keys     int
}

func (dashboardPage) title() string { return "Dashboard" }
func (dashboardPage) nav() string   { return "isv" }

func (p *Portal) ownListings(r *http.Request) ([]registryapi.Listing, error) {
	se := sessionOf(r)
	res, err := p.apiAs(&se.account).Listings(r.Context(), url.Values{"owner": {se.account.Name}, "limit": {"200"}})
	return res.Items, err
}

func (p *Portal) versions(r *http.Request, listingID string) ([]registryapi.Version, error) {
	res, err := p.apiAs(accountOf(r)).Versions(r.Context(), listingID, url.Values{"limit": {"200"}})
	return res.Items, err
}

func (p *Portal) dashboard(w http.ResponseWriter, r *http.Request) {
	ls, err := p.ownListings(r)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := dashboardPage{}
	for _, l := range ls {
		vs, err := p.versions(r, l.ID)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		row := listingRow{Listing: l}
		for _, v := range vs {
			row.Versions = append(row.Versions, viewOf(v))
		}
		pg.Listings = append(pg.Listings, row)
	}
	keys, err := p.apiAs(accountOf(r)).SigningKeys(r.Context(), url.Values{"limit": {"200"}})
	if err != nil {
		p.fail(w, r, err)
		return
	}
	for _, k := range keys.Items {
		if k.RevokedAt == nil {
			pg.Keys++
		}
	}
	p.render(w, r, http.StatusOK, pageISV, pg)
}

// listingForm is the listing editor's model: the form's values as typed,
// and its refusal. Typed holds what was typed into the page's other forms
// (tag rules, offers, versions), by field.
type listingForm struct {
	formRefusal
	ID, Name, Repository, Summary, Description, Category, BoardModel string
	Currency, PricePerHour, PricePerLoad, PricePerAttachedHour       string
	Visibility, TrialHours                                           string
	// RepoName is what the new listing's repository field takes: the
	// repository's name after the fixed "Owner/".
	RepoName   string
	Published  bool
	LogoDigest string
	Versions   []versionView
	Typed      map[string]string
	Owner      string
	Shares     []registryapi.Entitlement
	TagRules   []registryapi.TagRule
}

func (f listingForm) title() string {
	if f.ID == "" {
		return "New listing"
	}
	return "Edit " + f.Name
}
func (listingForm) nav() string { return "isv" }

func formOf(l registryapi.Listing) listingForm {
	return listingForm{ID: l.ID, Name: l.Name, Repository: l.Repository, Summary: l.Summary, Description: l.Description,
		Category: l.Category, BoardModel: l.BoardModel, Currency: l.Currency, Visibility: l.Visibility, Published: l.Published,
		PricePerHour: decimal(l.PricePerHourMicros), PricePerLoad: decimal(l.PricePerLoadMicros),
		PricePerAttachedHour: decimal(l.PricePerAttachedHourMicros), Owner: l.Owner, LogoDigest: l.LogoDigest,
		TrialHours: strconv.Itoa(l.TrialHours)}
}

// decimal writes micro-units as a decimal amount: 1500000 is "1.50".
// Integer arithmetic: a float64 loses cents on large amounts.
func decimal(micros int64) string {
	sign := ""
	if micros < 0 {
		sign, micros = "-", -micros
	}
	frac := strings.TrimRight(fmt.Sprintf("%06d", micros%1_000_000), "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return sign + strconv.FormatInt(micros/1_000_000, 10) + "." + frac
}

// errAmount refuses what is not a decimal amount.
var errAmount = errors.New("want an amount such as 1.50, with at most 6 decimals")

// micros reads a decimal amount of at most 6 decimals into micro-units,
// from its digits rather than through a float, which would round. A
// negative amount is read as such: the API refuses it, on the field.
func micros(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	neg := strings.HasPrefix(s, "-")
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	if len(frac) > 6 || whole == "" && frac == "" {
		return 0, errAmount
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil && whole != "" || w < 0 || w > math.MaxInt64/1_000_000-1 {
		return 0, errAmount
	}
	frac += strings.Repeat("0", 6-len(frac))
	f, err := strconv.ParseInt(frac, 10, 64)
	if err != nil || f < 0 {
		return 0, errAmount
	}
	if neg {
		return -(w*1_000_000 + f), nil
	}
	return w*1_000_000 + f, nil
}

func (p *Portal) newListing(w http.ResponseWriter, r *http.Request) {
	se := sessionOf(r)
	p.render(w, r, http.StatusOK, pageListingEdit, listingForm{Currency: "USD", Visibility: "public", Owner: se.account.Name})
}

// listingBody reads the editor's fields into f and returns them as the
// API's.
func listingBody(r *http.Request, f *listingForm) (registryapi.ListingFields, error) {
	for k, v := range map[string]*string{"name": &f.Name, "summary": &f.Summary,
		"description": &f.Description, "category": &f.Category, "board_model": &f.BoardModel, "currency": &f.Currency,
		"price_per_hour": &f.PricePerHour, "price_per_load": &f.PricePerLoad, "price_per_attached_hour": &f.PricePerAttachedHour,
		"visibility": &f.Visibility, "trial_hours": &f.TrialHours} {
		*v = strings.TrimSpace(r.PostFormValue(k))
	}
	trial, err := trialHours(f.TrialHours)
	if err != nil {
		return registryapi.ListingFields{}, err
	}
	pph, err := micros(f.PricePerHour)
	if err != nil {
		return registryapi.ListingFields{}, &fieldError{"price_per_hour", err.Error()}
	}
	ppl, err := micros(f.PricePerLoad)
	if err != nil {
		return registryapi.ListingFields{}, &fieldError{"price_per_load", err.Error()}
	}
	ppa, err := micros(f.PricePerAttachedHour)
	if err != nil {
		return registryapi.ListingFields{}, &fieldError{"price_per_attached_hour", err.Error()}
	}
	currency := strings.ToUpper(f.Currency)
	return registryapi.ListingFields{Name: &f.Name, Summary: &f.Summary, Description: &f.Description, Category: &f.Category,
		BoardModel: &f.BoardModel, Currency: &currency, PricePerHourMicros: &pph, PricePerLoadMicros: &ppl,
		PricePerAttachedHourMicros: &ppa, Visibility: &f.Visibility, TrialHours: &trial}, nil
}

// trialHours reads the free trial's whole hours; empty is none.
func trialHours(s string) (int, error) {
	if s == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > registryapi.MaxTrialHours {
		return 0, &fieldError{"trial_hours", fmt.Sprintf("want whole hours, 0 to %d", registryapi.MaxTrialHours)}
	}
	return n, nil
}

// repository joins the owner's namespace, shown as fixed text, and the
// name typed after it. The API refuses a repository outside the
// namespace; what it cannot tell from a mistake is the namespace typed
// again or a leading "/", which it would take as part of the name.
func repository(owner, name string) (string, error) {
	switch {
	case name == "":
		return "", &fieldError{"repository", "required: the name after " + owner + "/"}
	case strings.HasPrefix(name, "/"):
		return "", &fieldError{"repository", "give the name after " + owner + "/ without a leading /"}
	case strings.HasPrefix(name, owner+"/"):
		return "", &fieldError{"repository", owner + "/ is there already: give only the name after it"}
	}
	return owner + "/" + name, nil
}

// formError shows the editor again with the API's or the form's refusal,
// on its field when it names one.
func (p *Portal) formError(w http.ResponseWriter, r *http.Request, f listingForm, err error) {
	ae, isAPI := apiRefusal(err)
	switch {
	case isAPI && ae.Status < 500 && ae.Status != http.StatusUnauthorized:
		f.formRefusal = refused(err)
		f.priceInFormUnits()
		p.render(w, r, ae.Status, pageListingEdit, f)
	case isAPI:
		p.fail(w, r, err)
	default:
		f.formRefusal = refused(err)
		p.render(w, r, http.StatusUnprocessableEntity, pageListingEdit, f)
	}
}

// priceInFormUnits words the API's refusal of a price in the form's units:
// the API counts micro-units ("want 0 to 1000000000000 micro-units"), the
// form whole units of the currency.
func (f *listingForm) priceInFormUnits() {
	typed, ok := map[string]string{"price_per_hour": f.PricePerHour, "price_per_load": f.PricePerLoad,
		"price_per_attached_hour": f.PricePerAttachedHour}[f.Field]
	if !ok {
		return
	}
	f.FieldMsg = "at most " + decimal(registryapi.MaxPriceMicros)
	if strings.HasPrefix(typed, "-") {
		f.FieldMsg = "must not be negative"
	}
	f.Error = fieldLabels[f.Field] + ": " + f.FieldMsg
}

func (p *Portal) createListing(w http.ResponseWriter, r *http.Request) {
	f := listingForm{Owner: sessionOf(r).account.Name, RepoName: strings.TrimSpace(r.PostFormValue("repository"))}
	body, err := listingBody(r, &f)
	if err == nil {
		f.Repository, err = repository(f.Owner, f.RepoName)
	}
	if err != nil {
		p.formError(w, r, f, err)
		return
	}
	l, err := p.apiAs(accountOf(r)).CreateListing(r.Context(), registryapi.NewListing{ListingFields: body, Repository: f.Repository})
	if err != nil {
		p.formError(w, r, f, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(l.ID), "saved")
}

// ownedListing returns listing id if acct owns it. The /isv pages that
// show a listing ask it, since the API shows published listings to
// everyone; the forms get the same answer from the API's management
// routes (api, notYours). Either way another ISV's listing, even one the
// marketplace shows, answers 404 with one message, which never tells a
// private listing from a missing one.
func (p *Portal) ownedListing(ctx context.Context, acct auth.Account, id string) (registryapi.Listing, error) {
	l, err := p.apiAs(&acct).Listing(ctx, id)
	if ae, ok := apiRefusal(err); ok && ae.Status == http.StatusNotFound || err == nil && l.OwnerID != acct.ID {
		return registryapi.Listing{}, notYours()
	}
	return l, err
}

// notYours is the portal's one answer for a listing that is not the
// ISV's, missing or another's alike.
func notYours() error {
	return &registryclient.Error{Status: http.StatusNotFound, Code: registryapi.CodeNotFound, Message: "no such listing of yours"}
}

func (p *Portal) loadListingForm(r *http.Request, id string) (listingForm, error) {
	api := p.apiAs(accountOf(r))
	l, err := p.ownedListing(r.Context(), *accountOf(r), id)
	if err != nil {
		return listingForm{}, err
	}
	f := formOf(l)
	vs, err := p.versions(r, id)
	if err != nil {
		return f, err
	}
	for _, v := range vs {
		f.Versions = append(f.Versions, viewOf(v))
	}
	ents, err := api.Entitlements(r.Context(), url.Values{"listing_id": {id}, "active": {"true"}, "limit": {"200"}})
	if err != nil {
		return f, err
	}
	for _, e := range ents.Items {
		if e.Kind == "share" {
			f.Shares = append(f.Shares, e)
		}
	}
	rules, err := api.TagRules(r.Context(), id)
	f.TagRules = rules.Items
	return f, err
}

func (p *Portal) editListing(w http.ResponseWriter, r *http.Request) {
	f, err := p.loadListingForm(r, r.PathValue("id"))
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.render(w, r, http.StatusOK, pageListingEdit, f)
}

func (p *Portal) saveListing(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	f, err := p.loadListingForm(r, id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	body, err := listingBody(r, &f)
	if err != nil {
		p.formError(w, r, f, err)
		return
	}
	if _, err := p.apiAs(accountOf(r)).UpdateListing(r.Context(), id, body); err != nil {
		p.formError(w, r, f, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "saved")
}

func (p *Portal) publishListing(pub bool) http.HandlerFunc {
	flash := "published"
	if !pub {
		flash = "unpublished"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if _, err := p.apiAs(accountOf(r)).Publish(r.Context(), id, pub); err != nil {
			p.fail(w, r, err)
			return
		}
		p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), flash)
	}
}

func (p *Portal) shareListing(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := p.apiAs(accountOf(r)).Share(r.Context(), id, strings.TrimSpace(r.PostFormValue("account"))); err != nil {
		p.listingFormError(w, r, id, err)
		return
	}
	p.redirectFlash(w, r, "/isv/listings/"+url.PathEscape(id), "shared")
}

// attachVersion attaches a pushed image (by tag or digest) to a listing,
// which queues its validation.
func (p *Portal) attachVersion(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	version, digest := strings.TrimSpace(r.PostFormValue("version")), strings.TrimSpace(r.PostFormValue("digest"))
	if _, err := p.apiAs(accountOf(r)).AddVersion(r.Context(), id, registryapi.NewVersion{Version: version, Digest: digest}); err != nil {
		p.listingFormError(w, r, id, err)
		return
	}
	http.Redirect(w, r, "/isv/listings/"+url.PathEscape(id)+"/versions/"+url.PathEscape(version), http.StatusSeeOther)
}

type versionPage struct {
	formRefusal // of the documentation's form
	Host        string
	Listing     registryapi.Listing
	Version     versionView
	Done        bool   // validation ended: no more polling
	Docs        string // the version's documentation, Markdown, as the form shows it
}

func (v versionPage) title() string { return v.Listing.Name + " " + v.Version.Version.Version }
func (versionPage) nav() string     { return "isv" }

// versionPage shows a version's validation; while it runs, the state
// fragment polls itself (htmx) and, without script, the page refreshes by
// a link. Below it is the form of the version's documentation.
func (p *Portal) versionPage(w http.ResponseWriter, r *http.Request) {
	p.renderVersion(w, r, r.PathValue("id"), r.PathValue("version"), nil, http.StatusOK)
}

// renderVersion renders the page of a version with status, after adjust
// (when not nil) has changed what it shows: a refused form, say.
func (p *Portal) renderVersion(w http.ResponseWriter, r *http.Request, id, version string, adjust func(*versionPage), status int) {
	l, err := p.ownedListing(r.Context(), *accountOf(r), id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := versionPage{Host: r.Host, Listing: l}
	vs, err := p.versions(r, id)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	found := false
	for _, v := range vs {
		if v.Version == version {
			pg.Version, found = viewOf(v), true
		}
	}
	if !found {
		p.render(w, r, http.StatusNotFound, pageError, errorPage{Title: "Not found", Message: "This listing has no version " + version + "."})
		return
	}
	pg.Done = pg.Version.State == "available" || pg.Version.State == "failed"
	if r.Header.Get("HX-Request") == "true" {
		p.renderFragment(w, r, pageVersion, "state", pg)
		return
	}
	docs, err := p.apiAs(accountOf(r)).VersionDocs(r.Context(), id, version)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Docs = docs.Markdown
	if adjust != nil {
		adjust(&pg)
	}
	p.render(w, r, status, pageVersion, pg)
}
