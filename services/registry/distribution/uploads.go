package distribution

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// recordTimeout bounds the database writes that record what a request
// staged; they run even when the client went away meanwhile, since the
// bytes are in the store.
const recordTimeout = 30 * time.Second

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

// commitError maps a failed Commit.
func commitError(err error, d blob.Digest) error {
	if errors.Is(err, blob.ErrDigestMismatch) {
		return apiError(http.StatusBadRequest, codeDigestInvalid, "content does not match digest", string(d))
	}
	return err
}

func uploadUnknown(err error, id string) error {
	if errors.Is(err, meta.ErrNotFound) {
		return apiError(http.StatusNotFound, codeBlobUploadUnknown, "blob upload unknown to registry", id)
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
		return s.monolithic(c, name, account, d)
	}
	drain(c.Request().Body)
	up, err := s.begin(c, name, account)
	if err != nil {
		return err
	}
	setUploadHeaders(c, name, up.ID(), 0)
	return c.NoContent(http.StatusAccepted)
}

// begin starts an upload and its session.
func (s *server) begin(c echo.Context, name, account string) (blob.Upload, error) {
	ctx := c.Request().Context()
	up, err := s.cfg.Blobs.Begin(ctx)
	if err != nil {
		return nil, err
	}
	err = s.cfg.Meta.CreateUpload(ctx, name, up.ID(), account, s.cfg.MaxUploadSessions)
	if err != nil {
		_ = up.Cancel(context.WithoutCancel(ctx))
		if errors.Is(err, meta.ErrTooManyUploads) {
			return nil, tooManyRequests(c, "the account has as many upload sessions open as it may; finish or cancel some", s.cfg.MaxUploadSessions)
		}
		return nil, err
	}
	return up, nil
}

// monolithic is a whole blob in one POST. It is an upload session like any
// other while its body arrives, so that its staging is accounted for and
// ends with the session.
func (s *server) monolithic(c echo.Context, name, account string, d blob.Digest) error {
	leave, ok := s.active.enter(account)
	if !ok {
		return tooManyRequests(c, "too many uploads in progress for this account", s.cfg.MaxConcurrentUploads)
	}
	defer leave()
	b, err := s.admitBody(c, account)
	if err != nil {
		return err
	}
	defer b.end()
	up, err := s.begin(c, name, account)
	if err != nil {
		return err
	}
	release, _ := s.active.claim(up.ID()) // a new id: never busy
	defer release()
	ctx := c.Request().Context()
	info, err := s.write(c, up, b, true, d)
	if err == nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
		defer cancel()
		err = s.cfg.Meta.CompleteUpload(rctx, name, up.ID(), string(d), info.Size)
	}
	if err != nil {
		// Nothing to resume: the client never learnt the session.
		bg := context.WithoutCancel(ctx)
		_ = up.Cancel(bg)
		_ = s.cfg.Meta.EndUpload(bg, name, up.ID())
		return err
	}
	return created(c, name, d)
}

// write stages the request body into up, counting it as in flight b (nil:
// no limit), and, when commit is set, commits the upload as digest d. No
// database connection is held meanwhile: the body may take long to arrive.
func (s *server) write(c echo.Context, up blob.Upload, b *inFlight, commit bool, d blob.Digest) (blob.Info, error) {
	ctx := c.Request().Context()
	body, stop := s.body(c, s.cfg.MaxChunkBytes)
	_, err := up.Write(ctx, b.reader(body))
	stop()
	switch {
	case errors.Is(err, errStagingFull):
		return blob.Info{}, stagingFull(c, s.cfg.MaxStagedBytes)
	case errors.Is(err, meta.ErrTooManyBodies): // the body's lease passed, and others took its place
		return blob.Info{}, s.bodyLimitError(c, err)
	case errors.Is(err, blob.ErrNotFound): // cancelled or swept meanwhile
		return blob.Info{}, apiError(http.StatusNotFound, codeBlobUploadUnknown, "blob upload unknown to registry", up.ID())
	case err != nil:
		return blob.Info{}, bodyError(err, codeBlobUploadInvalid)
	case !commit:
		return blob.Info{}, nil
	}
	// Garbage collection spares the digest from here on (meta.HoldBlob).
	if err := s.cfg.Meta.HoldBlob(ctx, string(d)); err != nil {
		return blob.Info{}, err
	}
	info, err := up.Commit(ctx, d)
	if errors.Is(err, blob.ErrNotFound) {
		return blob.Info{}, apiError(http.StatusNotFound, codeBlobUploadUnknown, "blob upload unknown to registry", up.ID())
	}
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

// chunk is the common part of PATCH and PUT by account, authorized: it
// writes the request's body to upload id of repository name (and for a PUT
// commits it as d), then
// records the new offset, or the end of the session. The database is asked
// before and told after, in short statements; what guards an upload
// against two writers is the in-process claim and, across processes, the
// conditional update of the recorded offset (meta.AdvanceUpload).
func (s *server) chunk(c echo.Context, name, id, account string, commit bool, d blob.Digest) (offset int64, err error) {
	ctx := c.Request().Context()
	sess, err := s.cfg.Meta.GetUpload(ctx, name, id, s.cfg.UploadIdleTimeout)
	if err != nil {
		return 0, uploadUnknown(err, id)
	}
	leave, ok := s.active.enter(account)
	if !ok {
		return 0, tooManyRequests(c, "too many uploads in progress for this account", s.cfg.MaxConcurrentUploads)
	}
	defer leave()
	release, ok := s.active.claim(id)
	if !ok {
		return 0, s.busy(c, name, id)
	}
	defer release()
	up, err := s.resume(c, id)
	if err != nil {
		return 0, err
	}
	if err := checkContentRange(c, name, up); err != nil {
		return 0, err
	}
	// Counted until after the offset is recorded (deferred calls run
	// after the return values are computed): briefly twice rather than
	// not at all.
	b, err := s.admitBody(c, account)
	if err != nil {
		return 0, err
	}
	defer b.end()
	info, werr := s.write(c, up, b, commit, d)

	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	if werr == nil && commit {
		return info.Size, s.cfg.Meta.CompleteUpload(rctx, name, id, string(d), info.Size)
	}
	// Record what is staged now, also after a failed write: the store
	// keeps what arrived, and a client resumes from the status.
	err = s.cfg.Meta.AdvanceUpload(rctx, name, id, sess.Offset, up.Offset())
	switch {
	case errors.Is(err, meta.ErrUploadConflict):
		return 0, s.busy(c, name, id)
	case err != nil:
		return 0, uploadUnknown(err, id)
	case werr != nil:
		return 0, werr
	}
	return up.Offset(), nil
}

// busy answers a request for an upload that another request writes to.
func (s *server) busy(c echo.Context, name, id string) error {
	if up, err := s.cfg.Blobs.Resume(c.Request().Context(), id); err == nil {
		setUploadHeaders(c, name, id, up.Offset())
	}
	return apiError(http.StatusRequestedRangeNotSatisfiable, codeRangeInvalid,
		"another request is writing to this upload; get its status and continue from there", id)
}

func (s *server) patchUpload(c echo.Context, name, id string) error {
	account, err := s.authorizeAccount(c, name, ActionPush)
	if err != nil {
		return err
	}
	offset, err := s.chunk(c, name, id, account, false, "")
	if err != nil {
		return err
	}
	setUploadHeaders(c, name, id, offset)
	return c.NoContent(http.StatusAccepted)
}

func (s *server) putUpload(c echo.Context, name, id string) error {
	account, err := s.authorizeAccount(c, name, ActionPush)
	if err != nil {
		return err
	}
	d, err := parseDigest(c.QueryParam("digest"))
	if err != nil {
		return err
	}
	if _, err := s.chunk(c, name, id, account, true, d); err != nil {
		return err
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
	sess, err2 := s.cfg.Meta.GetUpload(c.Request().Context(), name, id, s.cfg.UploadIdleTimeout)
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

// cancelUpload is DELETE of an upload. It takes the upload's own grant,
// push, or delete: clients that choose tokens by method send the latter
// (the reference registry asks "delete" of this request), and who may
// delete a repository's content may end its uploads.
func (s *server) cancelUpload(c echo.Context, name, id string) error {
	err := s.authorize(c, name, ActionPush)
	var denied *httpError
	if errors.As(err, &denied) && denied.Status == http.StatusForbidden {
		if s.authorize(c, name, ActionDelete) == nil {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	// An expired session is unknown; the sweep removes it.
	if _, err := s.cfg.Meta.GetUpload(ctx, name, id, s.cfg.UploadIdleTimeout); err != nil {
		return uploadUnknown(err, id)
	}
	// The session first: once it is gone nobody writes to the upload, and
	// staging left by a failed Abort is an orphan that sweeps remove.
	if err := s.cfg.Meta.EndUpload(ctx, name, id); err != nil {
		return uploadUnknown(err, id)
	}
	if err := s.cfg.Blobs.Abort(ctx, id); err != nil && !errors.Is(err, blob.ErrNotFound) {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
