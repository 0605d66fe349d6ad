package registryclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

func refuse(status int, code, msg string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(registryapi.ErrorBody{Error: registryapi.ErrorInfo{Code: code, Message: msg, Field: "name"}})
	}
}

// TestErrorCategories: each answer is one *Error of the right category,
// with the envelope's code, message, field and Retry-After.
func TestErrorCategories(t *testing.T) {
	for _, c := range []struct {
		status int
		code   string
		want   error
		temp   bool
	}{
		{401, registryapi.CodeUnauthenticated, registryclient.ErrUnauthenticated, false},
		{403, registryapi.CodeForbidden, registryclient.ErrDenied, false},
		{403, registryapi.CodeNodeUntrusted, registryclient.ErrNodeUntrusted, false},
		{404, registryapi.CodeNotFound, registryclient.ErrNotFound, false},
		{409, registryapi.CodeConflict, registryclient.ErrConflict, false},
		{410, registryapi.CodeAttachmentEnded, registryclient.ErrGone, false},
		{422, registryapi.CodeInvalid, registryclient.ErrInvalid, false},
		{413, registryapi.CodeTooLarge, registryclient.ErrInvalid, false},
		{429, registryapi.CodeRateLimited, registryclient.ErrUnavailable, true},
		{503, registryapi.CodeUnavailable, registryclient.ErrUnavailable, true},
		{500, registryapi.CodeInternal, registryclient.ErrUnavailable, true},
	} {
		t.Run(fmt.Sprint(c.status, c.code), func(t *testing.T) {
			srv := httptest.NewServer(refuse(c.status, c.code, "no, because"))
			defer srv.Close()
			rc, err := registryclient.New(srv.URL, registryclient.WithToken("t"))
			if err != nil {
				t.Fatal(err)
			}
			_, err = rc.Me(context.Background())
			var e *registryclient.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want *Error", err, err)
			}
			if !errors.Is(err, c.want) {
				t.Errorf("error %v is not %v", err, c.want)
			}
			for _, other := range []error{registryclient.ErrNotFound, registryclient.ErrConflict, registryclient.ErrGone} {
				if other != c.want && errors.Is(err, other) {
					t.Errorf("error %v is also %v", err, other)
				}
			}
			if e.Status != c.status || e.Code != c.code || e.Message != "no, because" || e.Field != "name" ||
				e.RetryAfter != 7*time.Second || e.Method != "GET" || e.Path != "/api/v1/me" {
				t.Errorf("error %+v", e)
			}
			if got := registryclient.Temporary(err); got != c.temp {
				t.Errorf("Temporary(%v) = %v, want %v", err, got, c.temp)
			}
		})
	}
}

func TestTemporary(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, true},
		{&registryclient.Error{Status: 408}, true},
		{&registryclient.Error{Status: 400}, false},
		{&registryclient.Error{Err: errors.New("connection refused")}, true},
		{&registryclient.Error{Status: 200, Message: "malformed answer"}, false},
		{fmt.Errorf("usage: %w", &registryclient.Error{Status: 502}), true},
		{errors.New("something else"), false},
	} {
		if got := registryclient.Temporary(c.err); got != c.want {
			t.Errorf("Temporary(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

func TestUnreachable(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	rc, err := registryclient.New(url)
	if err != nil {
		t.Fatal(err)
	}
	_, err = rc.Me(context.Background())
	if !errors.Is(err, registryclient.ErrUnavailable) || !registryclient.Temporary(err) {
		t.Fatalf("error %v: want ErrUnavailable and temporary", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rc.Me(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("with a done context: %v, want context.Canceled", err)
	}
}

// TestCredentials: As changes the account of one copy only.
func TestCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := r.Header.Get("Authorization")
		if u, p, ok := r.BasicAuth(); ok {
			name = "basic " + u + ":" + p
		}
		json.NewEncoder(w).Encode(registryapi.Account{Name: name})
	}))
	defer srv.Close()
	node, err := registryclient.New(srv.URL+"/", registryclient.WithBasicAuth("node1", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, c := range []struct {
		c    *registryclient.Client
		want string
	}{
		{node, "basic node1:secret"},
		{node.As(registryclient.WithToken("faas_x")), "Bearer faas_x"},
		{node.As(), ""},
		{node, "basic node1:secret"},
	} {
		a, err := c.c.Me(ctx)
		if err != nil || a.Name != c.want {
			t.Errorf("Me = %q, %v; want %q", a.Name, err, c.want)
		}
	}
	for _, bad := range []string{"ftp://h", "http://", "h:5000", "https://h/api"} {
		if _, err := registryclient.New(bad); err == nil {
			t.Errorf("New(%q) took it", bad)
		}
	}
}

// TestListAll follows cursors to the last page, and stops at a registry
// that repeats one.
func TestListAll(t *testing.T) {
	pages := map[string]registryapi.Page[registryapi.Listing]{
		"":   {Items: []registryapi.Listing{{ID: "1"}, {ID: "2"}}, NextCursor: "c1"},
		"c1": {Items: []registryapi.Listing{{ID: "3"}}, NextCursor: "c2"},
		"c2": {Items: []registryapi.Listing{{ID: "4"}}},
		"c3": {Items: []registryapi.Listing{{ID: "5"}}, NextCursor: "c3"},
	}
	var limits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("q") != "fft" {
			http.Error(w, "filter lost", 400)
			return
		}
		limits = append(limits, r.URL.Query().Get("limit"))
		json.NewEncoder(w).Encode(pages[r.URL.Query().Get("cursor")])
	}))
	defer srv.Close()
	rc, _ := registryclient.New(srv.URL)
	got, err := registryclient.ListAll[registryapi.Listing](context.Background(), rc, "/listings", map[string][]string{"q": {"fft"}})
	if err != nil {
		t.Fatal(err)
	}
	var ids string
	for _, l := range got {
		ids += l.ID
	}
	if ids != "1234" || len(limits) != 3 || limits[0] != strconv.Itoa(registryapi.MaxLimit) {
		t.Errorf("ids %q limits %v", ids, limits)
	}
	_, err = registryclient.ListAll[registryapi.Listing](context.Background(), rc, "/listings", map[string][]string{"q": {"fft"}, "cursor": {"c3"}})
	if err == nil {
		t.Error("a repeated cursor was followed")
	}
}

// TestStatementsCSV: the CSV of statements comes back as the registry
// wrote it, asked for with format=csv beside the caller's query.
func TestStatementsCSV(t *testing.T) {
	const body = "month,tenant\n2030-01,alice\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != registryapi.Prefix+"/invoices" || r.URL.Query().Get("format") != "csv" || r.URL.Query().Get("month") != "2030-01" {
			http.Error(w, "unexpected "+r.URL.String(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/csv")
		w.Write([]byte(body))
	}))
	defer srv.Close()
	rc, err := registryclient.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	got, err := rc.StatementsCSV(context.Background(), "/invoices", map[string][]string{"month": {"2030-01"}})
	if err != nil || string(got) != body {
		t.Fatalf("StatementsCSV: %q, %v", got, err)
	}
}
