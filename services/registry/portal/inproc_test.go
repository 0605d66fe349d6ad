package portal

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// fakeAPI answers every request with its handler and remembers as whom
// and what it was asked.
type fakeAPI struct {
	serve func(w http.ResponseWriter, r *http.Request)
	as    *auth.Account
	req   *http.Request
	body  string
}

func (f *fakeAPI) ServeAs(w http.ResponseWriter, r *http.Request, acct *auth.Account) {
	b, _ := io.ReadAll(r.Body)
	f.as, f.req, f.body = acct, r, string(b)
	f.serve(w, r)
}

func testPortal(t *testing.T, api API) *Portal {
	t.Helper()
	pg, err := loadPages()
	if err != nil {
		t.Fatal(err)
	}
	c, err := registryclient.New(apiBase)
	if err != nil {
		t.Fatal(err)
	}
	return &Portal{cfg: Config{API: api}, api: c, pages: pg, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
}

func answer(status int, hdr map[string]string, v any) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, _ *http.Request) {
		for k, x := range hdr {
			w.Header().Set(k, x)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(v)
	}
}

// TestAPIAsServesInProcess: a call reaches API.ServeAs as the account,
// as a server request under /api/v1 with its JSON body, and its answer
// comes back decoded.
func TestAPIAsServesInProcess(t *testing.T) {
	api := &fakeAPI{serve: answer(http.StatusCreated, nil, registryapi.Version{Version: "1.0", State: "pending"})}
	p := testPortal(t, api)
	acct := &auth.Account{ID: "a1", Name: "acme", Role: auth.RoleISV}
	v, err := p.apiAs(acct).AddVersion(t.Context(), "l 1", registryapi.NewVersion{Version: "1.0", Digest: "sha256:00"})
	if err != nil || v.State != "pending" {
		t.Fatalf("AddVersion = %+v, %v", v, err)
	}
	if api.as != acct {
		t.Errorf("served as %+v, want %+v", api.as, acct)
	}
	if r := api.req; r.Method != http.MethodPost || r.URL.Path != registryapi.Prefix+"/listings/l 1/versions" ||
		r.RequestURI != registryapi.Prefix+"/listings/l%201/versions" || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s %s (URI %s, type %q)", r.Method, r.URL.Path, r.RequestURI, r.Header.Get("Content-Type"))
	}
	if !strings.Contains(api.body, `"digest":"sha256:00"`) {
		t.Errorf("body %s", api.body)
	}
	if _, err := p.apiAs(nil).Listings(t.Context(), nil); err != nil || api.as != nil {
		t.Errorf("anonymous call: %v, served as %+v", err, api.as)
	}
}

// TestAPIAsRefusal: a refusal of the API is a *registryclient.Error with
// its status, code, message, field and Retry-After, which fail passes on
// to the browser.
func TestAPIAsRefusal(t *testing.T) {
	api := &fakeAPI{serve: answer(http.StatusUnprocessableEntity, nil,
		registryapi.ErrorBody{Error: registryapi.ErrorInfo{Code: registryapi.CodeInvalid, Message: "name: too long", Field: "name"}})}
	p := testPortal(t, api)
	_, err := p.apiAs(&auth.Account{ID: "a1"}).CreateListing(t.Context(), registryapi.NewListing{Repository: "acme/x"})
	ae, ok := apiRefusal(err)
	if !ok || ae.Status != http.StatusUnprocessableEntity || ae.Code != registryapi.CodeInvalid || ae.Field != "name" ||
		ae.Message != "name: too long" || !errors.Is(err, registryclient.ErrInvalid) {
		t.Fatalf("refusal: %#v", err)
	}

	api.serve = answer(http.StatusTooManyRequests, map[string]string{"Retry-After": "7"},
		registryapi.ErrorBody{Error: registryapi.ErrorInfo{Code: registryapi.CodeRateLimited, Message: "slow down"}})
	_, err = p.apiAs(nil).Listing(t.Context(), "x")
	if ae, ok := apiRefusal(err); !ok || ae.Status != http.StatusTooManyRequests || ae.RetryAfter != 7*time.Second {
		t.Fatalf("rate limited: %#v", err)
	}
	w := httptest.NewRecorder()
	p.fail(w, httptest.NewRequest(http.MethodGet, "/listings/x", nil), err)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "7" || !strings.Contains(w.Body.String(), "slow down") {
		t.Errorf("fail answered %d, Retry-After %q, %s", w.Code, w.Header().Get("Retry-After"), w.Body)
	}
}

// TestAPIAsOversized: an answer over the client's bound is an internal
// error, not a truncated answer nor a refusal shown to the user.
func TestAPIAsOversized(t *testing.T) {
	api := &fakeAPI{serve: func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"items":[`))
		_, _ = w.Write(make([]byte, registryclient.MaxAnswerBytes))
	}}
	p := testPortal(t, api)
	_, err := p.apiAs(nil).Listings(t.Context(), nil)
	var ce *registryclient.Error
	if !errors.As(err, &ce) || ce.Status != 0 || !strings.Contains(err.Error(), "over") {
		t.Fatalf("oversized answer: %#v, want no answer", err)
	}
	w := httptest.NewRecorder()
	p.fail(w, httptest.NewRequest(http.MethodGet, "/", nil), err)
	if w.Code != http.StatusInternalServerError {
		t.Errorf("fail answered %d, want 500", w.Code)
	}
}
