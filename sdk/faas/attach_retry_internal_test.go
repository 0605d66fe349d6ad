package faas

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// failingPool is a registry whose nodes all fail to load: each attachment
// it places ends failed. It places on the first node the request does not
// exclude, and answers 409 when none is left.
type failingPool struct {
	t     *testing.T
	nodes []string
	mu    sync.Mutex
	reqs  []poolapi.AttachRequest
	atts  map[string]poolapi.Attachment
	gone  []string // detached attachments
}

func (f *failingPool) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	id := strings.TrimPrefix(r.URL.Path, "/api/v1/attachments/")
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/attachments":
		var req poolapi.AttachRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			f.t.Errorf("attach request: %v", err)
		}
		f.reqs = append(f.reqs, req)
		for i, n := range f.nodes {
			if slices.Contains(req.ExcludeNodes, n) {
				continue
			}
			a := poolapi.Attachment{ID: fmt.Sprintf("att-%d", len(f.reqs)), NodeID: n, Node: "host-" + n, Slot: i, State: poolapi.Pending,
				Credential: "faasa_x"}
			f.atts[a.ID] = a
			reply(http.StatusCreated, a)
			return
		}
		reply(http.StatusConflict, map[string]any{"error": map[string]string{"code": "conflict", "message": "no node in the pool has room"}})
	case r.Method == http.MethodGet:
		a, ok := f.atts[id]
		if !ok {
			reply(http.StatusNotFound, nil)
			return
		}
		a.State, a.Error = poolapi.Failed, "bitstream for another part on "+a.Node
		f.atts[id] = a
		reply(http.StatusOK, a)
	case r.Method == http.MethodDelete:
		f.gone = append(f.gone, id)
		reply(http.StatusOK, f.atts[id])
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/renew"):
		reply(http.StatusGone, map[string]any{"error": map[string]string{"code": "attachment_ended", "message": "failed"}})
	default:
		reply(http.StatusNotFound, nil)
	}
}

func newFailingPool(t *testing.T, nodes ...string) (*failingPool, string) {
	f := &failingPool{t: t, nodes: nodes, atts: map[string]poolapi.Attachment{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// TestAttachPlacesAgain: an attachment whose node fails is placed again
// away from the nodes that failed, at most WithAttachAttempts times, and
// the error reports every attempt.
func TestAttachPlacesAgain(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, url := newFailingPool(t, "n1", "n2", "n3", "n4")
	_, err := Attach(ctx, url, "acme/mnist:1", WithRegistryToken("tok"), WithLocalAgent("-"))
	var ae *AttachError
	if !errors.As(err, &ae) || !errors.Is(err, ErrAttachFailed) {
		t.Fatalf("err %v, want an AttachError wrapping ErrAttachFailed", err)
	}
	if len(ae.Attempts) != DefaultAttachAttempts {
		t.Fatalf("%d attempts, want %d: %+v", len(ae.Attempts), DefaultAttachAttempts, ae.Attempts)
	}
	for i, at := range ae.Attempts {
		want := fmt.Sprintf("n%d", i+1)
		if at.NodeID != want || at.Node != "host-"+want || at.State != poolapi.Failed || !strings.Contains(at.Error, "another part on host-"+want) ||
			at.Attachment == "" {
			t.Errorf("attempt %d: %+v, want failed on %s", i, at, want)
		}
		if !strings.Contains(err.Error(), "node host-"+want) {
			t.Errorf("the error does not name node %s: %v", want, err)
		}
	}
	// Each request excluded the nodes that had failed before it.
	f.mu.Lock()
	reqs := slices.Clone(f.reqs)
	f.mu.Unlock()
	for i, r := range reqs {
		var want []string
		for k := range i {
			want = append(want, fmt.Sprintf("n%d", k+1))
		}
		if !slices.Equal(r.ExcludeNodes, want) || r.Listing != "acme/mnist" || r.Version != "1" {
			t.Errorf("request %d: %+v, want exclude_nodes %q", i, r, want)
		}
	}

	// One attempt: no second placement.
	f, url = newFailingPool(t, "n1", "n2")
	_, err = Attach(ctx, url, "acme/mnist", WithRegistryToken("tok"), WithLocalAgent("-"), WithAttachAttempts(1))
	if !errors.As(err, &ae) || len(ae.Attempts) != 1 || len(f.reqs) != 1 {
		t.Fatalf("one attempt: %v, %d requests", err, len(f.reqs))
	}

	// The pool runs out of other nodes: the last error is the registry's
	// refusal, after the failures.
	_, url = newFailingPool(t, "n1")
	_, err = Attach(ctx, url, "acme/mnist", WithRegistryToken("tok"), WithLocalAgent("-"), WithAttachAttempts(5))
	if !errors.As(err, &ae) || !errors.Is(err, ErrNoCapacity) || len(ae.Attempts) != 2 || ae.Attempts[0].State != poolapi.Failed ||
		ae.Attempts[1].Attachment != "" || !strings.Contains(ae.Attempts[1].Error, "no node in the pool has room") {
		t.Fatalf("out of nodes: %v", err)
	}

	// Not placed at all: the registry's error as it was.
	_, url = newFailingPool(t)
	_, err = Attach(ctx, url, "acme/mnist", WithRegistryToken("tok"), WithLocalAgent("-"))
	if !errors.Is(err, ErrNoCapacity) || errors.As(err, &ae) {
		t.Fatalf("empty pool: %v", err)
	}
}
