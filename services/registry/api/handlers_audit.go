package api

import (
	"fmt"
	"net/http"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

func (a *API) listAudit(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	f := auditFilter{action: c.QueryParam("action"), targetType: c.QueryParam("target_type"),
		targetID: c.QueryParam("target_id"), actor: c.QueryParam("actor")}
	for _, v := range []struct{ name, v string }{{"action", f.action}, {"target_type", f.targetType}, {"target_id", f.targetID}, {"actor", f.actor}} {
		if len(v.v) > 256 {
			return fieldErr(v.name, "at most 256 bytes")
		}
	}
	rows, err := a.st.listAudit(c.Request().Context(), p, f, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.AuditEntry) cursor { return cursor{ID: fmt.Sprint(x.ID)} }))
}
