package portal_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryclient"
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

// TestVisitorSeesLoadableVersions: a signed-out visitor sees a published
// listing's versions that can be loaded, and the line that loads one, but
// neither the versions that failed validation nor their findings; the
// ISV sees them all.
func TestVisitorSeesLoadableVersions(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	id := r.listing("acme", "Edge FFT", "Fast.", true)
	good := r.version("acme", id, "acme/edge-fft", "1.0.0")
	r.version("acme", id, "acme/edge-fft", "2.0.0")
	ctx := t.Context()
	// The registry's worker fails both (they are no images); once it has,
	// one is made available by hand.
	deadline := time.Now().Add(time.Minute)
	for {
		var open int
		if err := r.srv.Pool().QueryRow(ctx, `select count(*) from validation_jobs where state not in ('available', 'failed')`).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d validations still running", open)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := r.srv.Pool().Exec(ctx, `update validation_jobs set state = 'available', reasons = '[]' where manifest_digest = $1`, good); err != nil {
		t.Fatal(err)
	}

	_, page := r.browser().get("/listings/" + id)
	if m := has(page, `id="load-line"`, "acme/edge-fft:1.0.0"); len(m) > 0 {
		t.Errorf("visitor's listing page lacks %q", m)
	}
	_, versions := r.browser().get("/listings/" + id + "?tab=versions")
	if m := has(versions, "<h2>Versions</h2>", "1.0.0"); len(m) > 0 {
		t.Errorf("visitor's versions tab lacks %q", m)
	}
	if strings.Contains(page, "2.0.0") || strings.Contains(versions, "2.0.0") {
		t.Error("visitor sees the version that failed validation")
	}

	anon, err := registryclient.New(r.url)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := anon.Versions(ctx, id, nil)
	if err != nil || len(vs.Items) != 1 || vs.Items[0].Version != "1.0.0" || string(vs.Items[0].Reasons) != "[]" {
		t.Fatalf("anonymous versions: %+v, %v; want 1.0.0 alone, without findings", vs.Items, err)
	}
	all, err := r.as("acme").Versions(ctx, id, nil)
	if err != nil || len(all.Items) != 2 {
		t.Fatalf("the ISV's versions: %+v, %v; want both", all.Items, err)
	}
}
