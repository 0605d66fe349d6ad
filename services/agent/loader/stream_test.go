package loader_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/blank"
	"github.com/fpga-faas/faas/sdk/agentapi"
)

// alteringTransport alters the bodies of the blob GETs of one layer on
// their way to the node, as a hostile mirror or a broken link would: it
// flips a byte in the middle, or ends the body there.
type alteringTransport struct {
	layer    string
	truncate bool
}

func (t alteringTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusOK || !strings.HasSuffix(req.URL.Path, "/blobs/"+t.layer) {
		return resp, err
	}
	resp.Body = &alteredBody{ReadCloser: resp.Body, at: resp.ContentLength / 2, truncate: t.truncate}
	return resp, nil
}

type alteredBody struct {
	io.ReadCloser
	at, n    int64
	truncate bool
}

func (b *alteredBody) Read(p []byte) (int, error) {
	if b.truncate && b.n >= b.at {
		return 0, io.EOF
	}
	if b.truncate {
		p = p[:min(int64(len(p)), b.at-b.n)]
	}
	n, err := b.ReadCloser.Read(p)
	if !b.truncate && b.at >= b.n && b.at < b.n+int64(n) {
		p[b.at-b.n] ^= 0x40
	}
	b.n += int64(n)
	return n, err
}

// TestStreamingAltered loads the two-chip image cold (its layers stream into
// the chips as they arrive) through a transport that alters one layer: the
// load fails with the digest error, both target chips are wiped, the altered
// layer is not cached, the slot the load did not target is untouched, and
// the next load works.
func TestStreamingAltered(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 2})
	if _, err := a.load("alice", f.loop.ref, nil); err != nil {
		t.Fatal(err)
	}
	// The dual image on board 1, so that its chips hold its digest before
	// the altered load replaces it.
	if _, err := a.load("alice", f.dual.ref, intp(2)); err != nil {
		t.Fatal(err)
	}
	layers := f.dual.layers
	for _, c := range []struct {
		name     string
		truncate bool
	}{{"tampered", false}, {"truncated", true}} {
		t.Run(c.name, func(t *testing.T) {
			for _, l := range layers {
				if a.cache.Has(l) {
					if err := a.cache.Remove(l); err != nil {
						t.Fatal(err)
					}
				}
			}
			before := a.states()
			if before[2].State != "loaded" || before[3].State != "loaded" {
				t.Fatalf("board 1 before: %+v %+v", before[2], before[3])
			}
			a.restart(alteringTransport{layer: layers[1], truncate: c.truncate}, nil)
			_, err := a.load("alice", f.dual.ref, intp(2))
			if err == nil {
				t.Fatal("load succeeded")
			}
			if code(err) != agentapi.CodeSignature || !strings.Contains(err.Error(), "does not match its digest") {
				t.Errorf("error %q (code %q), want %q mentioning the digest", err, code(err), agentapi.CodeSignature)
			}
			after := a.states()
			for _, i := range []int{2, 3} {
				if after[i] != (slotState{State: "cleared", RoleID: blank.ID}) {
					t.Errorf("slot %d after the failed load: %+v, want cleared, wiped", i, after[i])
				}
			}
			if after[0] != before[0] || after[1] != before[1] {
				t.Errorf("board 0, not targeted, changed: %+v, was %+v", after[:2], before[:2])
			}
			if a.cache.Has(layers[1]) {
				t.Errorf("the altered layer %s entered the cache", layers[1])
			}
			a.restart(nil, nil)
			if _, err := a.load("alice", f.dual.ref, intp(2)); err != nil {
				t.Fatalf("load after the failed one: %v", err)
			}
			checkConsistent(t, a)
			if !a.cache.Has(layers[1]) {
				t.Errorf("the layer %s did not enter the cache", layers[1])
			}
		})
	}
}
