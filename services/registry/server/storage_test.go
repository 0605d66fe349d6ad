package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/blob/dirstore"
	"github.com/fpga-faas/faas/services/registry/server"
)

// TestStorageFull fills the blob store's file system (a 2 MiB tmpfs): the
// refused upload answers 507 with a storage-full message, /readyz turns not
// ready with the reason, and the metrics say so, until space is freed.
func TestStorageFull(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink(testenv.Tmpfs(t, 2<<20), filepath.Join(dir, "blobs")); err != nil {
		t.Fatal(err)
	}
	r := start(t, server.Config{DataDir: dir, GCInterval: -1})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	tok := bearerToken(t, r.url, "isv1", isvPW, "repository:isv1/img:push,pull")
	do := func(method, path string, body []byte) (int, string, http.Header) {
		t.Helper()
		req, err := http.NewRequest(method, r.url+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	random := func(n int) []byte {
		p := make([]byte, n)
		rand.Read(p)
		return p
	}
	push := func(p []byte) (int, string) {
		code, body, _ := do(http.MethodPost, "/v2/isv1/img/blobs/uploads/?digest="+string(blob.FromBytes(p)), p)
		return code, body
	}
	wantFull := func(what string, code int, body string) {
		t.Helper()
		var e struct {
			Errors []struct{ Code, Message string }
		}
		if code != http.StatusInsufficientStorage || json.Unmarshal([]byte(body), &e) != nil || len(e.Errors) != 1 ||
			e.Errors[0].Code != "UNKNOWN" || !strings.HasPrefix(e.Errors[0].Message, "storage full") {
			t.Errorf("%s on a full store: %d %s, want 507 with a storage-full error", what, code, body)
		}
	}
	metric := func(name string) string {
		_, body := get(t, r.metrics+"/metrics", nil)
		for _, l := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(l, name+" "); ok {
				return v
			}
		}
		return ""
	}

	if resp, body := get(t, r.url+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz with room: %d %s", resp.StatusCode, body)
	}
	if v := metric("faas_registry_storage_full"); v != "0" {
		t.Errorf("faas_registry_storage_full with room = %q", v)
	}
	big := random(3 << 19)
	if code, body := push(big); code != http.StatusCreated {
		t.Fatalf("1.5 MiB push: %d %s", code, body)
	}

	code, body := push(random(1 << 20))
	wantFull("monolithic upload", code, body)
	code, body, h := do(http.MethodPost, "/v2/isv1/img/blobs/uploads/", nil)
	if code != http.StatusAccepted {
		t.Fatalf("start upload: %d %s", code, body)
	}
	code, body, _ = do(http.MethodPatch, h.Get("Location"), random(1<<20))
	wantFull("chunk", code, body)

	resp, body := get(t, r.url+"/readyz", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || body != "not ready: blob storage is full\n" {
		t.Errorf("readyz on a full store: %d %q", resp.StatusCode, body)
	}
	if v := metric("faas_registry_storage_full"); v != "1" {
		t.Errorf("faas_registry_storage_full = %q, want 1", v)
	}
	if v := metric("faas_registry_storage_refused_writes_total"); v != "2" {
		t.Errorf("faas_registry_storage_refused_writes_total = %q, want 2", v)
	}

	// Space freed (as garbage collection would): ready again.
	st, err := dirstore.New(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(context.Background(), blob.FromBytes(big)); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, r.url+"/readyz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after freeing space: %d %s", resp.StatusCode, body)
	}
	if v := metric("faas_registry_storage_full"); v != "0" {
		t.Errorf("faas_registry_storage_full after freeing space = %q", v)
	}
	if code, body := push(random(1 << 20)); code != http.StatusCreated {
		t.Errorf("push after freeing space: %d %s", code, body)
	}
}
