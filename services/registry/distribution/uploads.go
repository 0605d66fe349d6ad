package distribution

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

func uploadURL(name, id string) string          { return "/v2/" + name + "/blobs/uploads/" + url.PathEscape(id) }
func blobURL(name string, d blob.Digest) string { return "/v2/" + name + "/blobs/" + string(d) }

// setUploadHeaders describes an upload in progress: where to send the next
// request and what was received, as the inclusive range 0-(offset-1) (0-0
// before the first byte, as Docker's registry does).
func setUploadHeaders(c echo.Context, name, id string, offset int64) {
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, uploadURL(name, id))
	h.Set("Range", fmt.Sprintf("0-%d", max(offset-1, 0)))
	h.Set("Docker-Upload-UUID", id)
}

func created(c echo.Context, name string, d blob.Digest) error {
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, blobURL(name, d))
	h.Set("Docker-Content-Digest", string(d))
	return c.NoContent(http.StatusCreated)
}

// body returns the request body, capped by MaxChunkBytes.
func (s *server) body(c echo.Context) io.Reader {
	r := c.Request()
	if s.cfg.MaxChunkBytes > 0 {
		return http.MaxBytesReader(c.Response(), r.Body, s.cfg.MaxChunkBytes)
	}
	return r.Body
}

// writeError maps a failed upload Write.
func writeError(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return apiError(http.StatusRequestEntityTooLarge, codeSizeInvalid,
			fmt.Sprintf("chunk larger than %d bytes", tooBig.Limit), nil)
	}
	return err
}

// commitError maps a failed Commit.
func commitError(err error, d blob.Digest) error {
	if errors.Is(err, blob.ErrDigestMismatch) {
		return apiError(http.StatusBadRequest, codeDigestInvalid, "content does not match digest", string(d))
	}
	return err
}

// startUpload is POST /v2/<name>/blobs/uploads/: a mount, a monolithic
// upload (?digest=), or a new upload session.
func (s *server) startUpload(c echo.Context, name string) error {
	account, err := s.authorizeAccount(c, name, ActionPush)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	q := c.QueryParams()
	// The algorithm a chunked upload will be committed with. Nothing
	// depends on it here (Commit hashes with the algorithm of the closing
	// PUT's digest), but an algorithm the registry cannot verify is
	// refused now rather than after the upload.
	if q.Has("digest-algorithm") {
		if _, err := blob.ParseAlgorithm(q.Get("digest-algorithm")); err != nil {
			return apiError(http.StatusBadRequest, codeUnsupported, "unsupported digest algorithm; supported: sha256, sha512", q.Get("digest-algorithm"))
		}
	}
	if q.Has("mount") {
		d, err := parseDigest(q.Get("mount"))
		if err != nil {
			return err
		}
		from := q.Get("from")
		// A mount that cannot be done (unknown source, blob or access)
		// falls back to an upload session, as the specification asks.
		if from != "" && nameRe.MatchString(from) && s.cfg.Authorizer.Authorize(c.Request(), from, ActionPull) == nil {
			_, err := s.cfg.Meta.MountBlob(ctx, name, from, string(d))
			if err == nil {
				return created(c, name, d)
			}
			if !errors.Is(err, meta.ErrNotFound) {
				return err
			}
		}
	} else if q.Has("digest") {
		d, err := parseDigest(q.Get("digest"))
		if err != nil {
			return err
		}
		up, err := s.cfg.Blobs.Begin(ctx)
		if err != nil {
			return err
		}
		info, err := s.monolithic(c, up, d)
		if err != nil {
			_ = up.Cancel(ctx)
			return err
		}
		if err := s.cfg.Meta.PutBlob(ctx, name, string(d), info.Size); err != nil {
			return err
		}
		return created(c, name, d)
	}
	drain(c.Request().Body)
	up, err := s.cfg.Blobs.Begin(ctx)
	if err != nil {
		return err
	}
	if err := s.cfg.Meta.CreateUpload(ctx, name, up.ID(), account); err != nil {
		_ = up.Cancel(ctx)
		return err
	}
	setUploadHeaders(c, name, up.ID(), 0)
	return c.NoContent(http.StatusAccepted)
}

func (s *server) monolithic(c echo.Context, up blob.Upload, d blob.Digest) (blob.Info, error) {
	ctx := c.Request().Context()
	if _, err := up.Write(ctx, s.body(c)); err != nil {
		return blob.Info{}, writeError(err)
	}
	info, err := up.Commit(ctx, d)
	return info, commitError(err, d)
}

// resume finds upload id of the blob store for an existing session.
func (s *server) resume(c echo.Context, id string) (blob.Upload, error) {
	up, err := s.cfg.Blobs.Resume(c.Request().Context(), id)
	if errors.Is(err, blob.ErrNotFound) {
		return nil, apiError(http.StatusNotFound, codeBlobUploadUnknown, "blob upload unknown to registry", id)
	}
	return up, err
}

func uploadUnknown(err error, id string) error {
	if errors.Is(err, meta.ErrNotFound) {
		return apiError(http.StatusNotFound, codeBlobUploadUnknown, "blob upload unknown to registry", id)
	}
	return err
}

// checkContentRange checks a chunk's Content-Range "first-last" against
// the upload's offset and the request's length: chunks come in order.
func checkContentRange(c echo.Context, name string, up blob.Upload) error {
	cr := c.Request().Header.Get("Content-Range")
	if cr == "" {
		return nil
	}
	a, b, ok := strings.Cut(strings.TrimPrefix(cr, "bytes "), "-")
	first, err1 := strconv.ParseInt(a, 10, 64)
	last, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || first < 0 || last < first-1 {
		return apiError(http.StatusBadRequest, codeBlobUploadInvalid, "malformed Content-Range", cr)
	}
	cl := c.Request().ContentLength
	if first != up.Offset() || (cl >= 0 && cl != last-first+1) {
		setUploadHeaders(c, name, up.ID(), up.Offset())
		return apiError(http.StatusRequestedRangeNotSatisfiable, codeRangeInvalid,
			fmt.Sprintf("chunk %s does not continue the upload at offset %d", cr, up.Offset()), cr)
	}
	return nil
}

func (s *server) patchUpload(c echo.Context, name, id string) error {
	if err := s.authorize(c, name, ActionPush); err != nil {
		return err
	}
	var offset int64
	err := s.cfg.Meta.WithUpload(c.Request().Context(), name, id, func(ctx context.Context) (meta.UploadOutcome, error) {
		up, err := s.resume(c, id)
		if err != nil {
			return meta.UploadOutcome{}, err
		}
		if err := checkContentRange(c, name, up); err != nil {
			return meta.UploadOutcome{}, err
		}
		if _, err := up.Write(ctx, s.body(c)); err != nil {
			return meta.UploadOutcome{}, writeError(err)
		}
		offset = up.Offset()
		return meta.UploadOutcome{Offset: offset}, nil
	})
	if err != nil {
		return uploadUnknown(err, id)
	}
	setUploadHeaders(c, name, id, offset)
	return c.NoContent(http.StatusAccepted)
}

func (s *server) putUpload(c echo.Context, name, id string) error {
	if err := s.authorize(c, name, ActionPush); err != nil {
		return err
	}
	d, err := parseDigest(c.QueryParam("digest"))
	if err != nil {
		return err
	}
	err = s.cfg.Meta.WithUpload(c.Request().Context(), name, id, func(ctx context.Context) (meta.UploadOutcome, error) {
		up, err := s.resume(c, id)
		if err != nil {
			return meta.UploadOutcome{}, err
		}
		if err := checkContentRange(c, name, up); err != nil {
			return meta.UploadOutcome{}, err
		}
		// The final chunk, if any.
		if _, err := up.Write(ctx, s.body(c)); err != nil {
			return meta.UploadOutcome{}, writeError(err)
		}
		info, err := up.Commit(ctx, d)
		if err != nil {
			return meta.UploadOutcome{}, commitError(err, d)
		}
		return meta.UploadOutcome{Digest: string(d), Size: info.Size}, nil
	})
	if err != nil {
		return uploadUnknown(err, id)
	}
	return created(c, name, d)
}

// uploadStatus is GET of an upload: where it stands. It takes the upload's
// own grant, push; or pull, when the caller is the account that started
// the upload: clients that choose tokens by method (GET and HEAD: pull, as
// the reference registry asks for this request), such as the
// specification's conformance suite, send their pull token here.
func (s *server) uploadStatus(c echo.Context, name, id string) error {
	account, err := s.authorizeAccount(c, name, ActionPush)
	viaPull := false
	var denied *httpError
	if errors.As(err, &denied) && denied.Status == http.StatusForbidden {
		a, perr := s.authorizeAccount(c, name, ActionPull)
		if perr != nil || a == "" {
			return err
		}
		account, viaPull = a, true
	} else if err != nil {
		return err
	}
	sess, err2 := s.cfg.Meta.GetUpload(c.Request().Context(), name, id, 0)
	if viaPull && (err2 != nil || sess.Account != account) {
		return err // 403, whether or not such an upload exists
	}
	if err2 != nil {
		return uploadUnknown(err2, id)
	}
	up, err := s.resume(c, id)
	if err != nil {
		return err
	}
	setUploadHeaders(c, name, id, up.Offset())
	return c.NoContent(http.StatusNoContent)
}

func (s *server) cancelUpload(c echo.Context, name, id string) error {
	if err := s.authorize(c, name, ActionPush); err != nil {
		return err
	}
	err := s.cfg.Meta.WithUpload(c.Request().Context(), name, id, func(ctx context.Context) (meta.UploadOutcome, error) {
		err := s.cfg.Blobs.Abort(ctx, id)
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return meta.UploadOutcome{}, err
		}
		return meta.UploadOutcome{Ended: true}, nil
	})
	if err != nil {
		return uploadUnknown(err, id)
	}
	return c.NoContent(http.StatusNoContent)
}
