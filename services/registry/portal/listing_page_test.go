package portal_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

// TestListingPageShowsWhatIsSet: a visitor sees the fields a listing
// sets and no empty ones: no empty board or description, a price only
// when one is set (else "Free"), and one <h1>, the listing's name, even
// when its description has headings of its own.
func TestListingPageShowsWhatIsSet(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	var bare struct{ ID string }
	r.api("acme", http.MethodPost, "/listings", map[string]any{"name": "Bare", "repository": "acme/bare", "visibility": "public"}, &bare)
	r.api("acme", http.MethodPost, "/listings/"+bare.ID+"/publish", nil, nil)
	full := r.listing("acme", "Edge FFT", "# Edge FFT\n\nFast.\n\n## Use\n\nLoad it.", true)
	visitor := r.browser()

	resp, page := visitor.get("/listings/" + bare.ID)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bare listing: %d", resp.StatusCode)
	}
	for _, empty := range []string{"<dt>Board</dt>", `class="description"`, `class="lead"`, "0.00"} {
		if strings.Contains(page, empty) {
			t.Errorf("bare listing shows %q", empty)
		}
	}
	if !strings.Contains(page, "<dt>Price</dt><dd>Free</dd>") {
		t.Errorf("bare listing does not say it is free")
	}

	_, page = visitor.get("/listings/" + full)
	for _, want := range []string{"<dt>Board</dt><dd>faas-vu9p-2</dd>", "<dd>USD 1.50 per hour</dd>", "<h2>Edge FFT</h2>", "<h3>Use</h3>"} {
		if !strings.Contains(page, want) {
			t.Errorf("listing does not show %q", want)
		}
	}
	if n := strings.Count(page, "<h1"); n != 1 {
		t.Errorf("%d <h1> on the listing page, want 1", n)
	}

	_, page = visitor.get("/")
	if strings.Contains(page, "0.00") || !strings.Contains(page, `<span class="price">Free</span>`) || strings.Contains(page, `<span class="board"></span>`) {
		t.Errorf("marketplace cards: a zero price or an empty board shown, or the free listing not said free")
	}
}
