package portal_test

import (
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestPublishFormListing: the publish form opens on the ISV's own listing
// it names, and refuses any other (unknown, or another ISV's) with the
// portal's one "not yours" answer rather than preselecting another;
// without one, no listing is preselected.
func TestPublishFormListing(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("globex", auth.RoleISV)
	mine := r.listing("acme", "Edge FFT", "an FFT", false)
	r.listing("acme", "Loopback", "echo", false)
	theirs := r.listing("globex", "Matrix", "GEMM", true)
	b := r.browser()
	b.signIn("acme")

	for name, id := range map[string]string{"unknown": "00000000-0000-4000-8000-000000000000", "malformed": "x'", "another ISV's": theirs} {
		resp, page := b.get("/isv/publish?listing=" + id)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(page, "no such listing of yours") || strings.Contains(page, `id="p-listing"`) {
			t.Errorf("%s listing: %d, want 404 'no such listing of yours' and no form", name, resp.StatusCode)
		}
	}
	resp, page := b.get("/isv/publish?listing=" + mine)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<option value="`+mine+`" data-repo="acme/edge-fft" selected>`) {
		t.Fatalf("own listing: %d, not preselected", resp.StatusCode)
	}
	if _, page = b.get("/isv/publish"); strings.Count(page, " selected") != 1 || !strings.Contains(page, `<option value="" selected disabled>`) {
		t.Errorf("no listing named: want only the placeholder selected")
	}
}

// TestPublishImageName: an image is accepted only into the listing whose
// repository's last part is its own name, and the refusal names both.
func TestPublishImageName(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	key := r.isvKey("acme")
	listing := r.listing("acme", "Edge FFT", "an FFT", false)
	b := r.browser()
	b.signIn("acme")

	resp, page := b.upload(listing, "0.9.0", r.buildImage("loopback", "loopback", false, key))
	if msg := html.UnescapeString(errorOf(page)); resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(msg, `"loopback"`) || !strings.Contains(msg, "acme/edge-fft") {
		t.Fatalf("loopback into acme/edge-fft: %d %s, want 422 naming both", resp.StatusCode, msg)
	}
	if vs, err := r.as("acme").Versions(t.Context(), listing, nil); err != nil || len(vs.Items) != 0 {
		t.Fatalf("the refused upload added versions: %+v %v", vs.Items, err)
	}
	if resp, page := b.upload(listing, "0.9.0", r.buildImage("edge-fft", "loopback", false, key)); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("edge-fft into acme/edge-fft: %d %s", resp.StatusCode, errorOf(page))
	}
	if resp, _ := b.upload("00000000-0000-4000-8000-000000000000", "1.0.0", r.buildImage("edge-fft", "loopback", false, key)); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("upload into an unknown listing: %d, want 404", resp.StatusCode)
	}
}
