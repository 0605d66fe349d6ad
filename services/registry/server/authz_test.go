package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/server"
)

// TestRegistryAuthorizationMatrix calls every endpoint of /v2 (the list
// comes from distribution.Operations, so a new one fails the test until it
// has a row) and the token endpoint as anonymous, the owning ISV, another
// ISV, a tenant entitled to the repository, one that is not, a node
// account and an admin, each with the token /auth/token gives it for
// everything on the repository, and checks every status. (The /api/v1
// matrix is package api's TestAuthorizationMatrix; faasd's is in
// services/agent/server.)
func TestRegistryAuthorizationMatrix(t *testing.T) {
	r := start(t, server.Config{})
	ctx := context.Background()
	callers := []struct{ name, pw string }{{"", ""}, {"isv1", isvPW}, {"isv2", isvPW}, {"tenant1", tenantPW},
		{"tenant2", tenantPW}, {"node1", tenantPW}, {"admin1", adminPW}}
	for _, c := range callers[1:] {
		r.user(t, c.name, auth.Role(strings.TrimRight(c.name, "12")), c.pw)
	}
	const repo = "isv1/app"
	ref, _ := name.ParseReference(r.host+"/"+repo+":v1", name.Insecure)
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "isv1", Password: isvPW})); err != nil {
		t.Fatal(err)
	}
	md, _ := img.Digest()
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	// tenant1 holds a share of a private listing over the repository.
	pool := r.srv.Pool()
	if _, err := pool.Exec(ctx, `with l as (insert into listings (owner_id, repository_id, name)
			select a.id, r.id, 'app' from accounts a, repositories r where a.name = 'isv1' and r.name = $1 returning id)
		insert into entitlements (listing_id, account_id, kind) select l.id, a.id, 'share' from l, accounts a where a.name = 'tenant1'`,
		repo); err != nil {
		t.Fatal(err)
	}

	// The token endpoint grants each caller what the policy allows. A node
	// account pulls nothing on its own: faasd pulls with the tenant's
	// credentials.
	tokens := map[string]string{}
	wantGranted := map[string][]string{"isv1": {"delete", "pull", "push"}, "isv2": nil, "tenant1": {"pull"}, "tenant2": nil,
		"node1": nil, "admin1": {"delete", "pull", "push"}}
	for _, c := range callers {
		q := url.Values{"service": {server.DefaultService}, "scope": {"repository:" + repo + ":pull,push,delete"}}
		req, _ := http.NewRequest(http.MethodGet, r.url+"/auth/token?"+q.Encode(), nil)
		if c.name != "" {
			req.SetBasicAuth(c.name, c.pw)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if c.name == "" {
			if res.StatusCode != http.StatusUnauthorized {
				t.Errorf("/auth/token anonymous: %d", res.StatusCode)
			}
			continue
		}
		var tr struct{ Token string }
		if res.StatusCode != http.StatusOK || json.Unmarshal(b, &tr) != nil || tr.Token == "" {
			t.Fatalf("/auth/token as %s: %d %s", c.name, res.StatusCode, b)
		}
		tokens[c.name] = tr.Token
		if got := grantedActions(t, tr.Token, repo); !slices.Equal(got, wantGranted[c.name]) {
			t.Errorf("/auth/token as %s granted %v, want %v", c.name, got, wantGranted[c.name])
		}
	}
	// The catalog has its own scope.
	catalogTokens := map[string]string{}
	for _, c := range callers[1:] {
		catalogTokens[c.name] = bearerToken(t, r.url, c.name, c.pw, server.CatalogScope)
	}

	newUpload := func() string { // as isv1; returns the upload's path
		req, _ := http.NewRequest(http.MethodPost, r.url+"/v2/"+repo+"/blobs/uploads/", nil)
		req.Header.Set("Authorization", "Bearer "+tokens["isv1"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		loc := res.Header.Get("Location")
		if res.StatusCode != http.StatusAccepted || loc == "" {
			t.Fatalf("upload: %d %q", res.StatusCode, loc)
		}
		u, _ := url.Parse(loc)
		return u.Path
	}
	manifest, _ := img.RawManifest()
	mt, _ := img.MediaType()
	missing := "sha256:" + strings.Repeat("0", 64)
	type call struct {
		method, path string
		body         []byte
		hdr          map[string]string
	}
	const (
		ok   = 200 // any 2xx
		anon = 401
		deny = 403
	)
	cases := []struct {
		op   string
		call func() call
		want []int // per caller
	}{
		{"catalog GET", func() call { return call{"GET", "/v2/_catalog", nil, nil} }, []int{anon, deny, deny, deny, deny, deny, ok}},
		{"tags GET", func() call { return call{"GET", "/v2/" + repo + "/tags/list", nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
		{"manifest GET", func() call { return call{"GET", "/v2/" + repo + "/manifests/v1", nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
		{"manifest HEAD", func() call { return call{"HEAD", "/v2/" + repo + "/manifests/" + md.String(), nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
		{"manifest PUT", func() call {
			return call{"PUT", "/v2/" + repo + "/manifests/v2", manifest, map[string]string{"Content-Type": string(mt)}}
		}, []int{anon, ok, deny, deny, deny, deny, ok}},
		{"manifest DELETE", func() call { return call{"DELETE", "/v2/" + repo + "/manifests/" + missing, nil, nil} }, []int{anon, 404, deny, deny, deny, deny, 404}},
		{"uploads POST", func() call { return call{"POST", "/v2/" + repo + "/blobs/uploads/", nil, nil} }, []int{anon, ok, deny, deny, deny, deny, ok}},
		{"upload GET", func() call { return call{"GET", newUpload(), nil, nil} }, []int{anon, ok, deny, deny, deny, deny, ok}},
		{"upload PATCH", func() call {
			return call{"PATCH", newUpload(), []byte("abc"), map[string]string{"Content-Type": "application/octet-stream"}}
		}, []int{anon, ok, deny, deny, deny, deny, ok}},
		{"upload PUT", func() call { return call{"PUT", newUpload() + "?digest=" + missing, []byte("abc"), nil} }, []int{anon, 400, deny, deny, deny, deny, 400}},
		{"upload DELETE", func() call { return call{"DELETE", newUpload(), nil, nil} }, []int{anon, ok, deny, deny, deny, deny, ok}},
		{"blob GET", func() call { return call{"GET", "/v2/" + repo + "/blobs/" + ld.String(), nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
		{"blob HEAD", func() call { return call{"HEAD", "/v2/" + repo + "/blobs/" + ld.String(), nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
		{"blob DELETE", func() call { return call{"DELETE", "/v2/" + repo + "/blobs/" + missing, nil, nil} }, []int{anon, 404, deny, deny, deny, deny, 404}},
		{"referrers GET", func() call { return call{"GET", "/v2/" + repo + "/referrers/" + md.String(), nil, nil} }, []int{anon, ok, deny, ok, deny, deny, ok}},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		covered[c.op] = true
		for i, who := range callers {
			cl := c.call()
			req, _ := http.NewRequest(cl.method, r.url+cl.path, bytes.NewReader(cl.body))
			for k, v := range cl.hdr {
				req.Header.Set(k, v)
			}
			tok := tokens[who.name]
			if c.op == "catalog GET" {
				tok = catalogTokens[who.name]
			}
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			want := c.want[i]
			if res.StatusCode != want && !(want == ok && res.StatusCode/100 == 2) {
				t.Errorf("%s %s as %q: %d, want %d: %.300s", cl.method, cl.path, who.name, res.StatusCode, want, b)
			}
		}
	}
	for _, op := range distribution.Operations() {
		if !covered[op] {
			t.Errorf("/v2 operation %s is not in the matrix", op)
		}
	}
}

// grantedActions decodes (without verifying: the server did) the actions
// a registry token grants on repo.
func grantedActions(t *testing.T, token, repo string) []string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("token %q is not a JWT", token)
	}
	var claims struct {
		Access []auth.Access `json:"access"`
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &claims) != nil {
		t.Fatalf("token claims: %v %s", err, raw)
	}
	var got []string
	for _, a := range claims.Access {
		if a.Type == "repository" && a.Name == repo {
			got = append(got, a.Actions...)
		}
	}
	slices.Sort(got)
	return got
}
