package loader_test

import (
	"context"
	"slices"
	"testing"

	"github.com/fpga-faas/faas/services/agent/loader"
)

// TestCacheUsers: the blobs of an image are recorded in the cache as used
// by every tenant that loaded or pulled it, and by no other.
func TestCacheUsers(t *testing.T) {
	f := newFixture(t)
	a := newAgent(t, f.reg, agentOptions{boards: 1})
	users := func() map[string][]string {
		out := map[string][]string{}
		for _, e := range a.cache.List() {
			out[e.Digest] = e.Users
		}
		return out
	}
	if _, err := a.load("alice", f.loop.ref, nil); err != nil {
		t.Fatal(err)
	}
	first := users()
	if len(first) < 2 { // the manifest and the layer at least
		t.Fatalf("cache after alice's load: %v", first)
	}
	for d, u := range first {
		if !slices.Equal(u, []string{"alice"}) {
			t.Errorf("%s after alice's load: users %v, want [alice]", d, u)
		}
	}
	// bob pulls the same (public) image: cache hits, recorded for him too.
	if _, err := a.loader.Load(context.Background(), loader.Request{ID: "bob-pull", Image: f.loop.ref, Tenant: a.tenant("bob"), PullOnly: true}); err != nil {
		t.Fatal(err)
	}
	for d, u := range users() {
		if !slices.Equal(u, []string{"alice", "bob"}) {
			t.Errorf("%s after bob's pull: users %v, want [alice bob]", d, u)
		}
	}
}
