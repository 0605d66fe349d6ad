package distribution

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Manifest media types the registry accepts.
const (
	mediaTypeOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
)

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType    string            `json:"mediaType"`
	Digest       string            `json:"digest"`
	Size         int64             `json:"size"`
	ArtifactType string            `json:"artifactType,omitempty"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	URLs         []string          `json:"urls,omitempty"`
}

// external reports whether a layer lives outside registries: a
// non-distributable (OCI, deprecated) or foreign (Docker) layer with URLs to
// fetch it from. Registries accept manifests without having such blobs.
func (d descriptor) external() bool {
	return len(d.URLs) > 0 && (strings.HasPrefix(d.MediaType, "application/vnd.oci.image.layer.nondistributable.") ||
		strings.HasPrefix(d.MediaType, "application/vnd.docker.image.rootfs.foreign."))
}

// manifestDoc is the union of the fields of the accepted manifest kinds
// that the registry looks at.
type manifestDoc struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	ArtifactType  string            `json:"artifactType"`
	Config        *descriptor       `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Manifests     []descriptor      `json:"manifests"`
	Subject       *descriptor       `json:"subject"`
	Annotations   map[string]string `json:"annotations"`
}

func manifestInvalid(format string, args ...any) error {
	return apiError(http.StatusBadRequest, codeManifestInvalid, "manifest invalid", fmt.Sprintf(format, args...))
}

// parseManifest validates body as a manifest of mediaType (the request's
// Content-Type, or "" to take the body's) and returns what the metadata
// store records about it.
func parseManifest(body []byte, mediaType string) (meta.Manifest, error) {
	var doc manifestDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		return meta.Manifest{}, manifestInvalid("not JSON: %v", err)
	}
	if doc.SchemaVersion != 2 {
		return meta.Manifest{}, manifestInvalid("schemaVersion %d, want 2", doc.SchemaVersion)
	}
	if mediaType == "" {
		mediaType = doc.MediaType
	}
	if doc.MediaType != "" && doc.MediaType != mediaType {
		return meta.Manifest{}, manifestInvalid("mediaType %q differs from Content-Type %q", doc.MediaType, mediaType)
	}
	m := meta.Manifest{MediaType: mediaType, ArtifactType: doc.ArtifactType, Annotations: doc.Annotations}
	check := func(what string, d descriptor) error {
		if err := blob.Digest(d.Digest).Validate(); err != nil {
			return manifestInvalid("%s: invalid digest %q", what, d.Digest)
		}
		if d.Size < 0 {
			return manifestInvalid("%s: negative size", what)
		}
		return nil
	}
	switch mediaType {
	case mediaTypeOCIManifest, mediaTypeDockerManifest:
		if doc.Config == nil {
			return meta.Manifest{}, manifestInvalid("no config")
		}
		if err := check("config", *doc.Config); err != nil {
			return meta.Manifest{}, err
		}
		if len(doc.Manifests) > 0 {
			return meta.Manifest{}, manifestInvalid("an image manifest lists manifests")
		}
		m.Blobs = append(m.Blobs, doc.Config.Digest)
		for i, l := range doc.Layers {
			if err := check(fmt.Sprintf("layer %d", i), l); err != nil {
				return meta.Manifest{}, err
			}
			if !l.external() {
				m.Blobs = append(m.Blobs, l.Digest)
			}
		}
		// The referrers API reports the config's media type for image
		// manifests without an artifactType.
		if m.ArtifactType == "" && mediaType == mediaTypeOCIManifest {
			m.ArtifactType = doc.Config.MediaType
		}
	case mediaTypeOCIIndex, mediaTypeDockerList:
		if doc.Config != nil || len(doc.Layers) > 0 {
			return meta.Manifest{}, manifestInvalid("an index has a config or layers")
		}
		for i, d := range doc.Manifests {
			if err := check(fmt.Sprintf("manifest %d", i), d); err != nil {
				return meta.Manifest{}, err
			}
			m.Children = append(m.Children, d.Digest)
		}
	default:
		return meta.Manifest{}, manifestInvalid("unsupported manifest media type %q", mediaType)
	}
	if doc.Subject != nil {
		if err := check("subject", *doc.Subject); err != nil {
			return meta.Manifest{}, err
		}
		m.Subject = doc.Subject.Digest
	}
	return m, nil
}

func isDigestRef(ref string) bool { return strings.Contains(ref, ":") }

// maxTagParams bounds the tag parameters of one manifest push (the
// specification asks for at least 10).
const maxTagParams = 32

func (s *server) putManifest(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionPush); err != nil {
		return err
	}
	r := c.Request()
	limit := s.cfg.MaxManifestBytes
	if r.ContentLength > limit {
		return apiError(http.StatusRequestEntityTooLarge, codeSizeInvalid, fmt.Sprintf("manifest larger than %d bytes", limit), nil)
	}
	rd, stop := s.body(c, 0)
	body, err := io.ReadAll(io.LimitReader(rd, limit+1))
	stop()
	if err != nil {
		return bodyError(err, codeManifestInvalid)
	}
	if int64(len(body)) > limit {
		return apiError(http.StatusRequestEntityTooLarge, codeSizeInvalid, fmt.Sprintf("manifest larger than %d bytes", limit), nil)
	}
	// A manifest pushed by digest is stored under that digest, of its
	// algorithm; one pushed by tag under its canonical (sha256) digest.
	// Tags of a manifest of another algorithm come as tag parameters of a
	// push by digest, as the specification provides.
	var d blob.Digest
	var tags []string
	if isDigestRef(ref) {
		want, err := parseDigest(ref)
		if err != nil {
			return err
		}
		if d = want.Algorithm().FromBytes(body); want != d {
			return apiError(http.StatusBadRequest, codeDigestInvalid, "manifest does not match digest", ref)
		}
	} else if !tagRe.MatchString(ref) {
		return manifestInvalid("invalid tag %q", ref)
	} else {
		d = blob.Canonical.FromBytes(body)
		tags = append(tags, ref)
	}
	params := r.URL.Query()["tag"]
	if len(params) > maxTagParams {
		return apiError(http.StatusRequestURITooLong, codeUnsupported, fmt.Sprintf("more than %d tag parameters", maxTagParams), nil)
	}
	for _, t := range params {
		if !tagRe.MatchString(t) {
			return manifestInvalid("invalid tag %q", t)
		}
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	mediaType := ""
	if ct := r.Header.Get(echo.HeaderContentType); ct != "" {
		if mediaType, _, err = mime.ParseMediaType(ct); err != nil {
			return manifestInvalid("invalid Content-Type %q", ct)
		}
	}
	m, err := parseManifest(body, mediaType)
	if err != nil {
		return err
	}
	m.Digest, m.Content = string(d), body
	err = s.cfg.Meta.PutManifest(r.Context(), name, m, tags...)
	var missing *meta.MissingError
	if errors.As(err, &missing) {
		return apiError(http.StatusBadRequest, codeManifestBlobUnknown, "manifest references unknown content", missing.Digest)
	}
	if err != nil {
		return tagImmutable(err)
	}
	h := c.Response().Header()
	h.Set(echo.HeaderLocation, "/v2/"+name+"/manifests/"+string(d))
	h.Set("Docker-Content-Digest", string(d))
	for _, t := range params {
		h.Add("OCI-Tag", t)
	}
	if m.Subject != "" {
		h.Set("OCI-Subject", m.Subject)
	}
	return c.NoContent(http.StatusCreated)
}

func (s *server) getManifest(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionPull); err != nil {
		return err
	}
	if isDigestRef(ref) {
		if _, err := parseDigest(ref); err != nil {
			return err
		}
	}
	m, err := s.cfg.Meta.GetManifest(c.Request().Context(), name, ref)
	switch {
	case errors.Is(err, meta.ErrRepositoryUnknown):
		return apiError(http.StatusNotFound, codeNameUnknown, "repository name not known to registry", name)
	case errors.Is(err, meta.ErrNotFound):
		return apiError(http.StatusNotFound, codeManifestUnknown, "manifest unknown", ref)
	case err != nil:
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, m.MediaType)
	h.Set("Docker-Content-Digest", m.Digest)
	h.Set("ETag", `"`+m.Digest+`"`)
	h.Set(echo.HeaderContentLength, strconv.Itoa(len(m.Content)))
	c.Response().WriteHeader(http.StatusOK)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err = c.Response().Write(m.Content)
	return err
}

func (s *server) deleteManifest(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionDelete); err != nil {
		return err
	}
	ctx := c.Request().Context()
	var err error
	if isDigestRef(ref) {
		var d blob.Digest
		if d, err = parseDigest(ref); err != nil {
			return err
		}
		err = s.cfg.Meta.DeleteManifest(ctx, name, string(d))
	} else {
		err = s.cfg.Meta.DeleteTag(ctx, name, ref)
	}
	switch {
	case errors.Is(err, meta.ErrTagImmutable):
		return tagImmutable(err)
	case errors.Is(err, meta.ErrInUse):
		return apiError(http.StatusConflict, codeDenied, "manifest is listed by an index; delete the index first", ref)
	case errors.Is(err, meta.ErrNotFound):
		return apiError(http.StatusNotFound, codeManifestUnknown, "manifest unknown", ref)
	case err != nil:
		return err
	}
	return c.NoContent(http.StatusAccepted)
}

// tagImmutable answers a push or delete that would move an immutable tag
// (meta.ErrTagImmutable) with 409 Conflict and code TAG_INVALID, and
// passes any other error on. The code is the one ECR answers for its
// immutable tags (docker prints it as "tag invalid: …"); the status is
// Harbor's kind rather than ECR's 400, since the request is well formed
// and only the tag's state refuses it. The message names the listing and
// version, or the rule; the detail is the tag and the digest it keeps.
func tagImmutable(err error) error {
	var ie *meta.ImmutableError
	if !errors.As(err, &ie) {
		return err
	}
	return apiError(http.StatusConflict, codeTagInvalid, ie.Error(), immutableDetail{ie.Tag, ie.Digest, ie.Listing, ie.Pattern})
}

// immutableDetail is the detail of a TAG_INVALID error.
type immutableDetail struct {
	Tag     string `json:"tag"`
	Digest  string `json:"digest"`
	Listing string `json:"listing,omitempty"`
	Rule    string `json:"rule,omitempty"`
}
