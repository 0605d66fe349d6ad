package distribution

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/meta"
)

// pageParams reads the n and last parameters; n is -1 when absent.
func pageParams(c echo.Context) (n int, last string, err error) {
	n = -1
	if v := c.QueryParam("n"); v != "" {
		if n, err = strconv.Atoi(v); err != nil || n < 0 {
			return 0, "", apiError(http.StatusBadRequest, codeUnsupported, "invalid page size n", v)
		}
	}
	return n, c.QueryParam("last"), nil
}

// nextLink sets the Link header of a page that more entries follow.
func nextLink(c echo.Context, path string, n int, last string) {
	q := url.Values{"n": {strconv.Itoa(n)}, "last": {last}}
	c.Response().Header().Set("Link", "<"+path+"?"+q.Encode()+`>; rel="next"`)
}

func (s *server) tags(c echo.Context, name string) error {
	if err := s.authorize(c, name, ActionPull); err != nil {
		return err
	}
	n, last, err := pageParams(c)
	if err != nil {
		return err
	}
	tags, more, err := s.cfg.Meta.Tags(c.Request().Context(), name, n, last)
	if errors.Is(err, meta.ErrNotFound) {
		return apiError(http.StatusNotFound, codeNameUnknown, "repository name not known to registry", name)
	}
	if err != nil {
		return err
	}
	if more {
		nextLink(c, "/v2/"+name+"/tags/list", n, tags[len(tags)-1])
	}
	return c.JSON(http.StatusOK, struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	}{name, nonNil(tags)})
}

func (s *server) catalog(c echo.Context) error {
	if err := s.authorize(c, "", ActionCatalog); err != nil {
		return err
	}
	n, last, err := pageParams(c)
	if err != nil {
		return err
	}
	names, more, err := s.cfg.Meta.Catalog(c.Request().Context(), n, last)
	if err != nil {
		return err
	}
	if more {
		nextLink(c, "/v2/_catalog", n, names[len(names)-1])
	}
	return c.JSON(http.StatusOK, struct {
		Repositories []string `json:"repositories"`
	}{nonNil(names)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *server) referrers(c echo.Context, name, ref string) error {
	if err := s.authorize(c, name, ActionPull); err != nil {
		return err
	}
	d, err := parseDigest(ref)
	if err != nil {
		return err
	}
	artifactType := c.QueryParam("artifactType")
	refs, err := s.cfg.Meta.Referrers(c.Request().Context(), name, string(d), artifactType)
	if err != nil {
		return err
	}
	index := struct {
		SchemaVersion int          `json:"schemaVersion"`
		MediaType     string       `json:"mediaType"`
		Manifests     []descriptor `json:"manifests"`
	}{2, mediaTypeOCIIndex, make([]descriptor, 0, len(refs))}
	for _, r := range refs {
		index.Manifests = append(index.Manifests, descriptor{
			MediaType: r.MediaType, Digest: r.Digest, Size: r.Size,
			ArtifactType: r.ArtifactType, Annotations: r.Annotations,
		})
	}
	body, err := json.Marshal(index)
	if err != nil {
		return err
	}
	if artifactType != "" {
		c.Response().Header().Set("OCI-Filters-Applied", "artifactType")
	}
	return c.Blob(http.StatusOK, mediaTypeOCIIndex, body)
}
