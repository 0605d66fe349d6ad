package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// TestAttachAttemptsJSON: against a registry whose every node fails to
// load, faas attach --json places --attempts times on different nodes and
// prints each attempt, exiting 1.
func TestAttachAttemptsJSON(t *testing.T) {
	var mu sync.Mutex
	var excluded [][]string
	atts := map[string]poolapi.Attachment{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		id := strings.TrimPrefix(r.URL.Path, "/api/v1/attachments/")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/v1/attachments":
			var req poolapi.AttachRequest
			json.NewDecoder(r.Body).Decode(&req)
			excluded = append(excluded, req.ExcludeNodes)
			for _, n := range []string{"n1", "n2", "n3"} {
				if !slices.Contains(req.ExcludeNodes, n) {
					a := poolapi.Attachment{ID: fmt.Sprintf("att-%d", len(excluded)), NodeID: n, Node: "host-" + n, State: poolapi.Pending}
					atts[a.ID] = a
					w.WriteHeader(http.StatusCreated)
					json.NewEncoder(w).Encode(a)
					return
				}
			}
			w.WriteHeader(http.StatusConflict)
		case r.Method == http.MethodGet:
			a := atts[id]
			a.State, a.Error = poolapi.Failed, "self-test failed on "+a.Node
			json.NewEncoder(w).Encode(a)
		case r.Method == http.MethodDelete:
			json.NewEncoder(w).Encode(atts[id])
		default:
			w.WriteHeader(http.StatusGone)
		}
	}))
	defer srv.Close()
	t.Setenv("FAAS_TOKEN", "tok")
	t.Setenv("FAAS_CONFIG", t.TempDir()+"/none.json")

	out, code := faas(t, "attach", "acme/mnist:1", "--registry", srv.URL, "--json", "--attempts", "2")
	if code != 1 {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	line, _, _ := strings.Cut(out, "\n")
	var got struct {
		Error    string
		Attempts []poolapi.Attempt
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("--json output %q: %v", out, err)
	}
	if len(got.Attempts) != 2 || got.Attempts[0].NodeID != "n1" || got.Attempts[1].NodeID != "n2" ||
		got.Attempts[1].State != poolapi.Failed || !strings.Contains(got.Attempts[1].Error, "self-test failed on host-n2") ||
		!strings.Contains(got.Error, "attach failed") {
		t.Fatalf("attempts %+v", got)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(excluded) != 2 || len(excluded[0]) != 0 || !slices.Equal(excluded[1], []string{"n1"}) {
		t.Fatalf("exclude_nodes of the requests: %q", excluded)
	}
}
