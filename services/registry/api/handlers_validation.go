package api

import (
	"net/http"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

func (a *API) listValidationJobs(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	state := c.QueryParam("state")
	switch state {
	case "", "pending", "validating", "available", "failed":
	default:
		return fieldErr("state", "want pending, validating, available or failed")
	}
	rows, err := a.st.listValidationJobs(c.Request().Context(), state, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.ValidationJob) cursor { return cursor{x.CreatedAt, x.ID} }))
}
