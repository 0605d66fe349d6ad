package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// refused runs bin with args, which must fail, and returns its stderr.
func (c *clientEnv) refused(bin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir, cmd.Env = c.dir, c.env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		c.t.Fatalf("%s %s succeeded, want a refusal", filepath.Base(bin), strings.Join(args, " "))
	}
	return stderr.String()
}

// TestImmutableTagsCrane pushes with crane over a listed version's tag and
// over a tag a rule holds: refused with 409 TAG_INVALID naming the listing
// and version (or the rule), the tag keeps its image, and pushing that
// image again succeeds.
func TestImmutableTagsCrane(t *testing.T) {
	crane := tool(t, "crane", installCrane)
	r := start(t, server.Config{})
	r.user(t, "acme", auth.RoleISV, "pw-acme")
	c := newClientEnv(t)
	repo := r.host + "/acme/edge-fft"
	c.run(false, "pw-acme", crane, "auth", "login", r.host, "-u", "acme", "--password-stdin")
	push := func(tag, content string) string {
		layer := filepath.Join(c.dir, tag+content+".tar")
		layerTar(t, layer, map[string]string{"bitstream.txt": content})
		return layer
	}
	c.run(false, "", crane, "append", "--insecure", "-f", push("0.9.0", "first"), "-t", repo+":0.9.0")
	d1 := strings.TrimSpace(c.run(false, "", crane, "digest", "--insecure", repo+":0.9.0"))

	var l registryapi.Listing
	apiJSON(t, r, http.MethodPost, "/listings", `{"name":"Edge FFT","repository":"acme/edge-fft"}`, http.StatusCreated, &l)
	apiJSON(t, r, http.MethodPost, "/listings/"+l.ID+"/versions", `{"version":"0.9.0","digest":"`+d1+`"}`, http.StatusCreated, nil)

	msg := c.refused(crane, "append", "--insecure", "-f", push("0.9.0", "second"), "-t", repo+":0.9.0")
	t.Logf("crane: %s", msg)
	for _, want := range []string{"TAG_INVALID", `version 0.9.0 of listing "Edge FFT"`} {
		if !strings.Contains(msg, want) {
			t.Errorf("crane's refusal %q lacks %q", msg, want)
		}
	}
	if got := strings.TrimSpace(c.run(false, "", crane, "digest", "--insecure", repo+":0.9.0")); got != d1 {
		t.Errorf("after the refused push 0.9.0 names %s, want %s", got, d1)
	}
	c.run(false, "", crane, "copy", "--insecure", repo+"@"+d1, repo+":0.9.0")
	if msg := c.refused(crane, "delete", "--insecure", repo+":0.9.0"); !strings.Contains(msg, "TAG_INVALID") {
		t.Errorf("crane delete of a version's tag: %q", msg)
	}

	// A rule holds tags that name no version once they are set.
	apiJSON(t, r, http.MethodPost, "/listings/"+l.ID+"/tag-rules", `{"pattern":"release-*"}`, http.StatusCreated, nil)
	c.run(false, "", crane, "append", "--insecure", "-f", push("release-1", "rc1"), "-t", repo+":release-1")
	d2 := strings.TrimSpace(c.run(false, "", crane, "digest", "--insecure", repo+":release-1"))
	if d2 == d1 {
		t.Fatal("release-1 is the image of 0.9.0")
	}
	msg = c.refused(crane, "append", "--insecure", "-f", push("release-1", "third"), "-t", repo+":release-1")
	if !strings.Contains(msg, "TAG_INVALID") || !strings.Contains(msg, `rule "release-*"`) {
		t.Errorf("crane's refusal of release-1: %q", msg)
	}
	if got := strings.TrimSpace(c.run(false, "", crane, "digest", "--insecure", repo+":release-1")); got != d2 {
		t.Errorf("after the refused push release-1 names %s, want %s", got, d2)
	}
	wireRefusal(t, r, d2)
	c.run(false, "", crane, "append", "--insecure", "-f", push("dev", "third"), "-t", repo+":dev")
	c.run(false, "", crane, "append", "--insecure", "-f", push("dev", "fourth"), "-t", repo+":dev")
}

// apiJSON calls /api/v1 as acme, wants status want, and decodes the answer
// into out unless nil.
func apiJSON(t *testing.T, r *running, method, path, body string, want int, out any) {
	t.Helper()
	code, b := apiCall(t, r, method, path, "acme", body)
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, code, b, want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// wireRefusal puts manifest digest (release-1's) under the version's tag
// 0.9.0 and checks the answer's status and error body.
func wireRefusal(t *testing.T, r *running, digest string) {
	t.Helper()
	tok := bearerToken(t, r.url, "acme", "pw-acme", "repository:acme/edge-fft:pull,push,delete")
	resp, manifest := call(t, r.url, tok, http.MethodGet, "/v2/acme/edge-fft/manifests/"+digest, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET manifest: %d", resp.StatusCode)
	}
	resp, b := call(t, r.url, tok, http.MethodPut, "/v2/acme/edge-fft/manifests/0.9.0", manifest,
		"Content-Type", resp.Header.Get("Content-Type"))
	var body struct {
		Errors []struct {
			Code, Message string
			Detail        struct{ Tag, Digest, Listing string }
		}
	}
	if err := json.Unmarshal(b, &body); err != nil || resp.StatusCode != http.StatusConflict || len(body.Errors) != 1 {
		t.Fatalf("PUT over a version: %d %s (%v), want 409 and one error", resp.StatusCode, b, err)
	}
	e := body.Errors[0]
	if e.Code != "TAG_INVALID" || e.Detail.Tag != "0.9.0" || e.Detail.Listing != "Edge FFT" || e.Detail.Digest == digest ||
		!strings.Contains(e.Message, "Edge FFT") || !strings.Contains(e.Message, "0.9.0") {
		t.Errorf("PUT over a version: %s", b)
	}
	if resp, b := call(t, r.url, tok, http.MethodDelete, "/v2/acme/edge-fft/manifests/release-1", nil); resp.StatusCode != http.StatusConflict {
		t.Errorf("DELETE of a tag a rule holds: %d %s, want 409", resp.StatusCode, b)
	}
}

// TestImmutableTagsOras pushes an artifact with oras over a listed
// version's tag: refused the same way, and the tag keeps its artifact.
func TestImmutableTagsOras(t *testing.T) {
	oras := tool(t, "oras", installOras)
	r := start(t, server.Config{})
	r.user(t, "acme", auth.RoleISV, "pw-acme")
	c := newClientEnv(t)
	ref := r.host + "/acme/edge-fft:0.9.0"
	c.run(false, "pw-acme", oras, "login", "--plain-http", "-u", "acme", "--password-stdin", r.host)
	for _, f := range []string{"first.txt", "second.txt"} {
		if err := os.WriteFile(filepath.Join(c.dir, f), []byte(f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.run(false, "", oras, "push", "--plain-http", "--artifact-type", "application/vnd.faas.test", ref, "first.txt:text/plain")
	d1 := strings.TrimSpace(c.run(false, "", oras, "resolve", "--plain-http", ref))
	var l registryapi.Listing
	apiJSON(t, r, http.MethodPost, "/listings", `{"name":"Edge FFT","repository":"acme/edge-fft"}`, http.StatusCreated, &l)
	apiJSON(t, r, http.MethodPost, "/listings/"+l.ID+"/versions", `{"version":"0.9.0","digest":"`+d1+`"}`, http.StatusCreated, nil)

	msg := c.refused(oras, "push", "--plain-http", "--artifact-type", "application/vnd.faas.test", ref, "second.txt:text/plain")
	// oras, like docker, knows TAG_INVALID and says "tag invalid".
	if !strings.Contains(msg, "tag invalid: tag 0.9.0") || !strings.Contains(msg, "Edge FFT") {
		t.Errorf("oras's refusal: %q", msg)
	}
	if got := strings.TrimSpace(c.run(false, "", oras, "resolve", "--plain-http", ref)); got != d1 {
		t.Errorf("after the refused push 0.9.0 names %s, want %s", got, d1)
	}
}
