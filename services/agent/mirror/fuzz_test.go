package mirror

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzBlobPath: whatever path a request carries, blobPath either refuses it
// or splits it into a valid repository and a canonical digest that put back
// together give the path, so nothing else is ever sent to a mirror.
func FuzzBlobPath(f *testing.F) {
	for _, s := range []string{
		"/v2/acme/loop/blobs/sha256:" + strings.Repeat("a", 64),
		"/v2/a/b/c/blobs/sha512:" + strings.Repeat("0", 128),
		"/v2/acme/loop/blobs/uploads/",
		"/v2/acme/loop/manifests/sha256:" + strings.Repeat("a", 64),
		"/v2/acme/blobs/x/blobs/sha256:" + strings.Repeat("A", 64),
		"/v2//blobs/sha256:", "/v2/../blobs/sha256:" + strings.Repeat("1", 64), "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		repo, digest, ok := blobPath(p)
		if !ok {
			return
		}
		if "/v2/"+repo+"/blobs/"+digest != p {
			t.Fatalf("blobPath(%q) = %q, %q", p, repo, digest)
		}
		if !repoRE.MatchString(repo) || strings.Contains(repo, "..") {
			t.Fatalf("blobPath(%q): repository %q", p, repo)
		}
	})
}

// FuzzParseURL: a mirror URL is refused with an error or is an http(s) URL
// of a host without credentials, query or fragment.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:65001", "https://m.example/cache/", "http://u:p@m", "ftp://m", "http://m/v2", "http://[::1]:4001", "%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseURL(s)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
			t.Fatalf("ParseURL(%q) = %s", s, u)
		}
		if _, err := ParseURL(u.String()); err != nil {
			t.Fatalf("ParseURL(%q) = %s, which it refuses: %v", s, u, err)
		}
	})
}

// FuzzRedirect: a mirror's Location leads to an http(s) URL of a host
// without credentials, or is refused.
func FuzzRedirect(f *testing.F) {
	for _, s := range []string{"/local/v2/x", "http://peer:65002/piece?x=1", "https://bucket.s3/o?X-Amz-Signature=1", "file:///etc/passwd",
		"//other/x", "http://u:p@h/", "", "http://%41/"} {
		f.Add(s)
	}
	from, _ := url.Parse("http://127.0.0.1:65001/v2/acme/loop/blobs/sha256:" + strings.Repeat("a", 64) + "?ns=registry:5000")
	f.Fuzz(func(t *testing.T, loc string) {
		u, err := redirect(from, loc)
		if err != nil {
			return
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			t.Fatalf("redirect(%q) = %s", loc, u)
		}
	})
}
