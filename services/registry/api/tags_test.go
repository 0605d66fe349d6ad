package api_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// put stores a manifest made from seed in repo under tags and returns its
// digest and the store's answer.
func (e *env) put(repo, seed string, tags ...string) (string, error) {
	content := []byte(fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","annotations":{"seed":%q}}`, seed))
	sum := sha256.Sum256(content)
	d := "sha256:" + hex.EncodeToString(sum[:])
	return d, e.meta.PutManifest(context.Background(), repo, meta.Manifest{Digest: d, MediaType: "application/vnd.oci.image.manifest.v1+json", Content: content}, tags...)
}

func (e *env) tagDigest(repo, tag string) string {
	e.t.Helper()
	m, err := e.meta.GetManifest(context.Background(), repo, tag)
	if err != nil {
		e.t.Fatalf("tag %s: %v", tag, err)
	}
	return m.Digest
}

// immutable checks that err refuses tag for being the listing's version
// (listing != "") or matching pattern.
func immutable(t *testing.T, err error, tag, listing, pattern string) {
	t.Helper()
	var ie *meta.ImmutableError
	if !errors.As(err, &ie) || !errors.Is(err, meta.ErrTagImmutable) {
		t.Fatalf("err = %v, want an ImmutableError of %s", err, tag)
	}
	if ie.Tag != tag || ie.Listing != listing || ie.Pattern != pattern {
		t.Errorf("ImmutableError %+v, want tag %s listing %q pattern %q", ie, tag, listing, pattern)
	}
}

func TestListedVersionsCannotMove(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d1, err := e.put("isv1/fft", "one", "0.9.0")
	if err != nil {
		t.Fatal(err)
	}
	var L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "Edge FFT", "repository": "isv1/fft"}).decode(t, &L)
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": "0.9.0", "digest": d1})

	_, err = e.put("isv1/fft", "two", "0.9.0")
	immutable(t, err, "0.9.0", "Edge FFT", "")
	if got := e.tagDigest("isv1/fft", "0.9.0"); got != d1 {
		t.Errorf("after the refused push, 0.9.0 names %s, want %s", got, d1)
	}
	if _, err := e.put("isv1/fft", "one", "0.9.0", "latest"); err != nil {
		t.Errorf("pushing the version's own image again: %v", err)
	}
	immutable(t, e.meta.DeleteTag(ctx, "isv1/fft", "0.9.0"), "0.9.0", "Edge FFT", "")
	immutable(t, e.meta.DeleteManifest(ctx, "isv1/fft", d1), "0.9.0", "Edge FFT", "")
	if err := e.meta.DeleteTag(ctx, "isv1/fft", "latest"); err != nil {
		t.Errorf("delete of a mutable tag: %v", err)
	}

	// A version by digest also holds its name as a tag not pushed yet, and
	// a version cannot be added under a tag naming another image.
	d2, err := e.put("isv1/fft", "two", "1.0.0")
	if err != nil {
		t.Fatal(err)
	}
	r := e.must(409, "isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": "1.0.0", "digest": d1})
	t.Logf("version under a tag naming another image: %s", r.body)
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": "0.9.1", "digest": d2})
	_, err = e.put("isv1/fft", "three", "0.9.1")
	immutable(t, err, "0.9.1", "Edge FFT", "")
	if _, err := e.put("isv1/fft", "two", "0.9.1"); err != nil {
		t.Errorf("tagging the version's image with its name: %v", err)
	}

	var tag registryapi.Tag
	e.must(200, "isv1", "GET", "/listings/"+L.ID+"/tags/0.9.0", nil).decode(t, &tag)
	if !tag.Immutable || tag.Digest != d1 || tag.Reason == "" {
		t.Errorf("tag 0.9.0: %+v", tag)
	}
	e.must(200, "isv1", "GET", "/listings/"+L.ID+"/tags/1.0.0", nil).decode(t, &tag)
	if tag.Immutable || tag.Digest != d2 {
		t.Errorf("tag 1.0.0: %+v", tag)
	}
}

func TestTagRules(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	d1, err := e.put("isv1/app", "one", "dev")
	if err != nil {
		t.Fatal(err)
	}
	var L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "app", "repository": "isv1/app"}).decode(t, &L)
	for _, bad := range []string{"", "[", "a b", "v/1"} {
		e.must(422, "isv1", "POST", "/listings/"+L.ID+"/tag-rules", item{"pattern": bad})
	}
	var R registryapi.TagRule
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/tag-rules", item{"pattern": "release-*"}).decode(t, &R)
	e.must(409, "isv1", "POST", "/listings/"+L.ID+"/tag-rules", item{"pattern": "release-*"})
	var rules registryapi.Items[registryapi.TagRule]
	e.must(200, "isv1", "GET", "/listings/"+L.ID+"/tag-rules", nil).decode(t, &rules)
	if len(rules.Items) != 1 || rules.Items[0].Pattern != "release-*" {
		t.Fatalf("rules %+v", rules)
	}

	// Set once, then fixed; other tags move.
	if _, err := e.put("isv1/app", "one", "release-1"); err != nil {
		t.Fatalf("first push of release-1: %v", err)
	}
	_, err = e.put("isv1/app", "two", "release-1", "dev")
	immutable(t, err, "release-1", "", "release-*")
	if got := e.tagDigest("isv1/app", "dev"); got != d1 {
		t.Errorf("a refused push moved dev, a tag of the same push, to %s", got)
	}
	if _, err := e.put("isv1/app", "one", "release-1"); err != nil {
		t.Errorf("same image again: %v", err)
	}
	if _, err := e.put("isv1/app", "two", "dev"); err != nil {
		t.Errorf("dev matches no rule: %v", err)
	}
	immutable(t, e.meta.DeleteTag(ctx, "isv1/app", "release-1"), "release-1", "", "release-*")
	// Signing appends to cosign's signature tags, so not even "*" holds them.
	e.must(201, "isv1", "POST", "/listings/"+L.ID+"/tag-rules", item{"pattern": "*"})
	sig := strings.Replace(d1, ":", "-", 1) + ".sig"
	for _, seed := range []string{"signed once", "countersigned"} {
		if _, err := e.put("isv1/app", seed, sig); err != nil {
			t.Errorf("signature tag %s (%s): %v", sig, seed, err)
		}
	}
	_, err = e.put("isv1/app", "one", "dev")
	immutable(t, err, "dev", "", "*")
	var tag registryapi.Tag
	e.must(200, "isv1", "GET", "/listings/"+L.ID+"/tags/release-1", nil).decode(t, &tag)
	if !tag.Immutable || tag.Digest != d1 {
		t.Errorf("tag release-1: %+v", tag)
	}

	e.must(204, "isv1", "DELETE", "/listings/"+L.ID+"/tag-rules/"+R.ID, nil)
	var star registryapi.TagRule
	e.must(200, "isv1", "GET", "/listings/"+L.ID+"/tag-rules", nil).decode(t, &rules)
	for _, r := range rules.Items {
		if r.Pattern == "*" {
			star = r
		}
	}
	e.must(204, "isv1", "DELETE", "/listings/"+L.ID+"/tag-rules/"+star.ID, nil)
	if _, err := e.put("isv1/app", "two", "release-1"); err != nil {
		t.Errorf("without its rule release-1 moves: %v", err)
	}
}

// TestVersionRacesPush adds versions while the same tags are pushed with
// another image: whichever lands first, the version and its tag agree.
func TestVersionRacesPush(t *testing.T) {
	e := newEnv(t)
	a, err := e.put("isv1/race", "a", "base")
	if err != nil {
		t.Fatal(err)
	}
	var L registryapi.Listing
	e.must(201, "isv1", "POST", "/listings", item{"name": "race", "repository": "isv1/race"}).decode(t, &L)
	for i := range 20 {
		tag := fmt.Sprintf("1.%d", i)
		var added resp
		var pushErr error
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			added = e.do("isv1", "POST", "/listings/"+L.ID+"/versions", item{"version": tag, "digest": a})
		}()
		go func() { defer wg.Done(); _, pushErr = e.put("isv1/race", "b", tag) }()
		wg.Wait()
		m, err := e.meta.GetManifest(context.Background(), "isv1/race", tag)
		switch {
		case added.status == 201 && pushErr == nil:
			t.Fatalf("%s: both the version (%s) and a push of another image succeeded", tag, a)
		case added.status == 201 && (err == nil && m.Digest != a):
			t.Fatalf("%s: version names %s, its tag %s", tag, a, m.Digest)
		case added.status != 201 && (added.status != 409 || pushErr != nil):
			t.Fatalf("%s: version %d %s, push %v: want one to win", tag, added.status, added.body, pushErr)
		}
	}
}
