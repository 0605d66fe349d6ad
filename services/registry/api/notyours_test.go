package api_test

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// TestNotYoursOneAnswer asks every management route of a listing, as
// another ISV, about a published listing it can see, a private one it
// cannot, a missing id and a malformed one: the same 404 body each time.
func TestNotYoursOneAnswer(t *testing.T) {
	e := newEnv(t)
	d := e.pushManifest("isv1/pub", "1")
	e.pushManifest("isv1/priv", "1")
	var P, L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "pub", "repository": "isv1/pub", "visibility": "public"}).decode(t, &P)
	e.must(200, "isv1", "POST", "/listings/"+P.ID+"/publish", nil)
	e.must(201, "isv1", "POST", "/listings", item{"name": "priv", "repository": "isv1/priv"}).decode(t, &L)
	routes := []struct {
		method, suffix string
		body           any
	}{
		{"PATCH", "", item{"summary": "mine now"}},
		{"POST", "/publish", nil},
		{"POST", "/unpublish", nil},
		{"POST", "/versions", item{"version": "9", "digest": d}},
		{"POST", "/shares", item{"account": "tenant1"}},
		{"GET", "/tag-rules", nil},
		{"POST", "/tag-rules", item{"pattern": "v*"}},
		{"DELETE", "/tag-rules/00000000-0000-0000-0000-000000000001", nil},
		{"GET", "/tags/1", nil},
		{"PUT", "/logo", item{}}, // not an image: refused only after the listing is found the caller's
		{"DELETE", "/logo", nil},
		{"PUT", "/versions/1/docs", item{"markdown": "mine now"}},
	}
	for _, r := range routes {
		var first string
		for _, id := range []string{P.ID, L.ID, "00000000-0000-0000-0000-000000000000", "not-an-id"} {
			got := e.do("isv2", r.method, "/listings/"+id+r.suffix, r.body)
			if got.status != 404 {
				t.Errorf("%s /listings/%s%s as isv2: %d %s, want 404", r.method, id, r.suffix, got.status, got.body)
			}
			if first == "" {
				first = string(got.body)
			} else if string(got.body) != first {
				t.Errorf("%s /listings/%s%s as isv2: %s, unlike the published listing's %s", r.method, id, r.suffix, got.body, first)
			}
		}
	}
}
