package server_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/server"
)

// call sends a request with a bearer token and returns the response with
// its body read.
func call(t *testing.T, base, token, method, path string, body []byte, hdr ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// TestUploadStatusTokens: a client that keeps one token for GET and HEAD
// (pull) and one for POST, PATCH and PUT (push), as the distribution-spec
// conformance suite does, reads the status of its chunked upload with its
// pull token; the push token works too. It used to answer 403.
func TestUploadStatusTokens(t *testing.T) {
	r := start(t, server.Config{})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	const repo = "isv1/img"
	pull := bearerToken(t, r.url, "isv1", isvPW, "repository:"+repo+":pull")
	push := bearerToken(t, r.url, "isv1", isvPW, "repository:"+repo+":push")

	p := []byte("chunked upload")
	if resp, _ := call(t, r.url, pull, "HEAD", "/v2/"+repo+"/blobs/"+string(blob.FromBytes(p)), nil); resp.StatusCode != 404 {
		t.Fatalf("HEAD blob: %d", resp.StatusCode)
	}
	resp, b := call(t, r.url, push, "POST", "/v2/"+repo+"/blobs/uploads/", nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != 202 || loc == "" {
		t.Fatalf("POST: %d %s", resp.StatusCode, b)
	}
	if resp, b := call(t, r.url, push, "PATCH", loc, p[:5], "Content-Range", "0-4"); resp.StatusCode != 202 {
		t.Fatalf("PATCH: %d %s", resp.StatusCode, b)
	}
	for name, tok := range map[string]string{"pull": pull, "push": push} {
		resp, b := call(t, r.url, tok, "GET", loc, nil)
		if resp.StatusCode != 204 || resp.Header.Get("Range") != "0-4" {
			t.Errorf("GET status with the %s token: %d, Range %q, %s", name, resp.StatusCode, resp.Header.Get("Range"), b)
		}
	}
	if resp, b := call(t, r.url, push, "PUT", loc+"?digest="+string(blob.FromBytes(p)), p[5:], "Content-Range", "5-13"); resp.StatusCode != 201 {
		t.Fatalf("PUT: %d %s", resp.StatusCode, b)
	}
}
