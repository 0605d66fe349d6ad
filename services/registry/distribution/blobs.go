package distribution

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// parseDigest parses a digest of a request. A malformed digest and one of
// an algorithm other than sha256 and sha512 answer 400 DIGEST_INVALID, as
// the specification asks of registries ("if the client provided digest is
// invalid or uses an unsupported algorithm").
func parseDigest(s string) (blob.Digest, error) {
	d, err := blob.ParseDigest(s)
	switch {
	case errors.Is(err, blob.ErrUnsupportedDigest):
		return "", apiError(http.StatusBadRequest, codeDigestInvalid, "unsupported digest algorithm; supported: sha256, sha512", s)
	case err != nil:
		return "", apiError(http.StatusBadRequest, codeDigestInvalid, "invalid digest", s)
	}
	return d, nil
}

func (s *server) getBlob(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionPull); err != nil {
		return err
	}
	d, err := parseDigest(ref)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	size, err := s.cfg.Meta.BlobSize(ctx, name, string(d))
	if errors.Is(err, meta.ErrNotFound) {
		return apiError(http.StatusNotFound, codeBlobUnknown, "blob unknown to registry", string(d))
	}
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Docker-Content-Digest", string(d))
	if r := c.Request(); s.redirector != nil && r.Method == http.MethodGet && r.Header.Get("Range") == "" {
		u, err := s.redirector.RedirectURL(ctx, d, s.cfg.BlobRedirectExpiry)
		if err != nil {
			return err
		}
		if !forwardsAuthorization(r, u) {
			// The URL expires: no cache may keep the redirect.
			h.Set("Cache-Control", "no-store")
			h.Set(echo.HeaderLocation, u.String())
			return c.NoContent(http.StatusTemporaryRedirect)
		}
	}
	h.Set("Accept-Ranges", "bytes")
	h.Set("ETag", `"`+string(d)+`"`)
	h.Set(echo.HeaderContentType, "application/octet-stream")
	offset, length, status := int64(0), size, http.StatusOK
	if rh := c.Request().Header.Get("Range"); rh != "" {
		first, last, ok := parseByteRange(rh, size)
		if !ok {
			h.Set("Content-Range", fmt.Sprintf("bytes */%d", size))
			return apiError(http.StatusRequestedRangeNotSatisfiable, codeRangeInvalid, "invalid range", rh)
		}
		offset, length, status = first, last-first+1, http.StatusPartialContent
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", first, last, size))
	}
	h.Set(echo.HeaderContentLength, strconv.FormatInt(length, 10))
	if c.Request().Method == http.MethodHead {
		c.Response().WriteHeader(status)
		return nil
	}
	rc, err := s.cfg.Blobs.Open(ctx, d, offset, length)
	if errors.Is(err, blob.ErrNotFound) {
		return apiError(http.StatusNotFound, codeBlobUnknown, "blob unknown to registry", string(d))
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	c.Response().WriteHeader(status)
	if wt, ok := rc.(io.WriterTo); ok && kernelCopies(c.Request()) {
		// The store's body hands its file or socket to the response's
		// ReadFrom, and the kernel moves the bytes (sendfile, splice).
		_, err = wt.WriteTo(responseWriter{c.Response()})
		return err // the answer is committed: only the request log sees it
	}
	// Large copies: with 32 KiB ones (io.Copy's default) a pull is mostly
	// read and write system calls. The wrappers keep io.CopyBuffer from
	// bypassing the buffer through ReaderFrom/WriterTo.
	buf := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(buf)
	_, err = io.CopyBuffer(struct{ io.Writer }{c.Response()}, struct{ io.Reader }{rc}, *buf)
	return err // the answer is committed: only the request log sees it
}

// kernelCopies reports whether a response to r goes out on a plain TCP
// connection, which the kernel can fill from a file or socket. On TLS (and
// HTTP/2) ReadFrom copies through 32 KiB buffers, slower than ours.
func kernelCopies(r *http.Request) bool { return r.TLS == nil && r.ProtoMajor == 1 }

// responseWriter passes the ReadFrom of the writer under an echo.Response
// through, counting the bytes as the Response's Write does.
type responseWriter struct{ r *echo.Response }

func (w responseWriter) Write(p []byte) (int, error) { return w.r.Write(p) }

// ReadFrom implements io.ReaderFrom.
func (w responseWriter) ReadFrom(src io.Reader) (int64, error) {
	rf, ok := w.r.Writer.(io.ReaderFrom)
	if !ok {
		return io.Copy(struct{ io.Writer }{w}, src)
	}
	n, err := rf.ReadFrom(src)
	w.r.Size += n
	return n, err
}

// forwardsAuthorization reports whether a client that set the Authorization
// header on request r would likely send it along to the redirect target u:
// Go's http.Client (and clients modelled on it) resend it when u's host name
// is r's or a subdomain of it, whatever the port. The store would then see
// two authentications, the header and the URL's signature, and S3 refuses
// that (MinIO: 400 InvalidRequest "request has multiple authentication
// types"), so such requests are served directly instead.
func forwardsAuthorization(r *http.Request, u *url.URL) bool {
	if r.Header.Get("Authorization") == "" {
		return false
	}
	reqHost := strings.ToLower(hostname(r.Host))
	dest := strings.ToLower(u.Hostname())
	return dest == reqHost || strings.HasSuffix(dest, "."+reqHost)
}

// hostname strips the port of a Host header value.
func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// copyBufs holds the buffers blob downloads copy through.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 1<<20); return &b }}

// parseByteRange parses a single range "bytes=a-b", "bytes=a-" or
// "bytes=-n" of a blob of size bytes into its first and last byte.
func parseByteRange(h string, size int64) (first, last int64, ok bool) {
	spec, found := strings.CutPrefix(h, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return 0, 0, false
	}
	a, b, found := strings.Cut(strings.TrimSpace(spec), "-")
	if !found {
		return 0, 0, false
	}
	var err error
	switch {
	case a == "" && b == "":
		return 0, 0, false
	case a == "": // the last b bytes
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n <= 0 || size == 0 {
			return 0, 0, false
		}
		return max(size-n, 0), size - 1, true
	}
	if first, err = strconv.ParseInt(a, 10, 64); err != nil || first < 0 || first >= size {
		return 0, 0, false
	}
	last = size - 1
	if b != "" {
		if last, err = strconv.ParseInt(b, 10, 64); err != nil || last < first {
			return 0, 0, false
		}
		last = min(last, size-1)
	}
	return first, last, true
}

func (s *server) deleteBlob(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionDelete); err != nil {
		return err
	}
	d, err := parseDigest(ref)
	if err != nil {
		return err
	}
	err = s.cfg.Meta.UnlinkBlob(c.Request().Context(), name, string(d))
	if errors.Is(err, meta.ErrNotFound) {
		return apiError(http.StatusNotFound, codeBlobUnknown, "blob unknown to registry", string(d))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusAccepted)
}
