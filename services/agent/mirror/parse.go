package mirror

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// ErrBadURL: a mirror URL is not an absolute http or https URL of a host,
// with at most a path prefix.
var ErrBadURL = errors.New("bad registry mirror URL")

// ParseURL parses a mirror's base URL, as given to faasd's
// --registry-mirror: http or https, a host, and optionally a path that
// prefixes /v2/ (containerd's mirror URLs without override_path). Userinfo,
// queries and fragments are refused: a mirror gets no credentials of its
// own from faasd, and its URL is logged and used as a metric label.
func ParseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		// The input may hold a password: name the fault, not the input.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrBadURL, u.Redacted(), why) }
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, bad("want an http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, bad("no host")
	case u.User != nil:
		return nil, bad("credentials in the URL are not sent to mirrors")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "":
		return nil, bad("only a scheme, a host and a path prefix are allowed")
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	if strings.HasSuffix(u.Path, "/v2") {
		// containerd's convention: the /v2 is added, not given.
		return nil, bad("leave out /v2; it is appended")
	}
	return u, nil
}

// repoRE is the distribution spec's repository name grammar.
var repoRE = regexp.MustCompile(`^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$`)

// blobPath splits /v2/<repo>/blobs/<digest> into repo and digest. Only
// sha256 and sha512 digests in canonical lowercase hex are accepted: any
// other path is not a blob by digest, and goes to the registry.
func blobPath(p string) (repo, digest string, ok bool) {
	rest, ok := strings.CutPrefix(p, "/v2/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "/blobs/")
	if i <= 0 || len(rest) > 4096 {
		return "", "", false
	}
	repo, digest = rest[:i], rest[i+len("/blobs/"):]
	if !repoRE.MatchString(repo) {
		return "", "", false
	}
	alg, hex, ok := strings.Cut(digest, ":")
	if !ok {
		return "", "", false
	}
	switch {
	case alg == "sha256" && len(hex) == 64, alg == "sha512" && len(hex) == 128:
	default:
		return "", "", false
	}
	for _, c := range hex {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return "", "", false
		}
	}
	return repo, digest, true
}
