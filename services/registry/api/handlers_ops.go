package api

import (
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

func (a *API) updateAccount(c echo.Context, p *principal) error {
	var ch registryapi.AccountUpdate
	if err := a.decode(c, &ch); err != nil {
		return err
	}
	if ch.Role == nil && ch.Disabled == nil {
		return fmt.Errorf("%w: nothing to change: give role or disabled", ErrInvalid)
	}
	if ch.Role != nil && !auth.Role(*ch.Role).Valid() {
		return fieldErr("role", "want isv, tenant or admin")
	}
	acct, err := a.st.updateAccount(c.Request().Context(), p, c.Param("id"), ch)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, acct)
}

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

// listLoads answers the caller's own current loads only, whatever its
// role: nodes and other tenants' loads stay the operator's view.
func (a *API) listLoads(c echo.Context, p *principal) error {
	rows, err := a.st.listLoads(c.Request().Context(), p)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []registryapi.Load{}
	}
	return c.JSON(http.StatusOK, registryapi.Items[registryapi.Load]{Items: rows})
}
