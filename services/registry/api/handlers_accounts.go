package api

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/labstack/echo/v4"
)

func (a *API) me(c echo.Context, p *principal) error {
	return c.JSON(http.StatusOK, registryapi.Account{ID: p.ID, Name: p.Name, Role: string(p.Role), Disabled: p.Disabled, CreatedAt: p.CreatedAt})
}

func (a *API) createAccount(c echo.Context, p *principal) error {
	var req registryapi.NewAccount
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if len(req.Name) > 64 || !nameRE.MatchString(req.Name) {
		return fieldErr("name", "want lower-case letters and digits separated by . _ or -, at most 64")
	}
	if !auth.Role(req.Role).Valid() {
		return fieldErr("role", "want isv, tenant, admin or node")
	}
	if len(req.Password) > auth.MaxPasswordLen || strings.HasPrefix(req.Password, auth.TokenPrefix) {
		return fieldErr("password", "at most %d bytes, not starting with %q", auth.MaxPasswordLen, auth.TokenPrefix)
	}
	acct, err := a.st.createAccount(c.Request().Context(), p, req.Name, auth.Role(req.Role), req.Password)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, acct)
}

func (a *API) listAccounts(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	role := c.QueryParam("role")
	if role != "" && !auth.Role(role).Valid() {
		return fieldErr("role", "want isv, tenant, admin or node")
	}
	rows, err := a.st.listAccounts(c.Request().Context(), pg, role)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Account) cursor { return cursor{x.CreatedAt, x.ID} }))
}

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
