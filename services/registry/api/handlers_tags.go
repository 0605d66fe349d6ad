package api

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// tagPatternChars are the characters of tags and of path.Match's syntax:
// anything else could never match a tag, and is a typo.
const tagPatternChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-*?[]^!\\"

func validTagPattern(p string) error {
	if len(p) < 1 || len(p) > 128 {
		return fieldErr("pattern", "length must be in [1, 128]")
	}
	for _, c := range p {
		if !strings.ContainsRune(tagPatternChars, c) {
			return fieldErr("pattern", "%q is neither a tag character nor one of path.Match's * ? [ ] ^ ! \\", c)
		}
	}
	if _, err := path.Match(p, ""); err != nil {
		return fieldErr("pattern", "malformed: %v (the syntax is Go's path.Match: v*, release-*, v[0-9]*)", err)
	}
	return nil
}

func (a *API) listTagRules(c echo.Context, p *principal) error {
	rs, err := a.st.tagRules(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	if rs == nil {
		rs = []registryapi.TagRule{}
	}
	return c.JSON(http.StatusOK, registryapi.Items[registryapi.TagRule]{Items: rs})
}

func (a *API) addTagRule(c echo.Context, p *principal) error {
	var req registryapi.NewTagRule
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if err := validTagPattern(req.Pattern); err != nil {
		return err
	}
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	r, err := a.st.addTagRule(c.Request().Context(), p, c.Param("id"), req.Pattern)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

func (a *API) deleteTagRule(c echo.Context, p *principal) error {
	if !isUUID(c.Param("id")) {
		return notYours()
	}
	if !isUUID(c.Param("rule")) {
		return fmt.Errorf("%w: tag rule", ErrNotFound)
	}
	if err := a.st.deleteTagRule(c.Request().Context(), p, c.Param("id"), c.Param("rule")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) getTag(c echo.Context, p *principal) error {
	tag := c.Param("tag")
	if !versionRE.MatchString(tag) {
		return fieldErr("tag", "want 1-128 characters of [A-Za-z0-9._-], starting alphanumeric")
	}
	t, err := a.st.tag(c.Request().Context(), p, c.Param("id"), tag)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}
