package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

func (a *API) createToken(c echo.Context, p *principal) error {
	var req registryapi.NewToken
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if len(req.Name) > 128 {
		return fieldErr("name", "at most 128 bytes")
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		return fieldErr("expires_at", "must be in the future")
	}
	t, err := a.st.issueToken(c.Request().Context(), p, req.Name, req.ExpiresAt)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, t)
}

func (a *API) listTokens(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listTokens(c.Request().Context(), p.ID, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Token) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) revokeToken(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: token", ErrNotFound)
	}
	if err := a.st.revokeToken(c.Request().Context(), p, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
