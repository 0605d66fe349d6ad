package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// getSpendLimits is GET /accounts/{name}/spend-limits: the tenant itself
// or an admin; anyone else is told there is no such tenant of theirs.
func (a *API) getSpendLimits(c echo.Context, p *principal) error {
	out, err := a.st.spendLimits(c.Request().Context(), p, c.Param("name"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// putSpendLimit is PUT /accounts/{name}/spend-limits/{currency}.
func (a *API) putSpendLimit(c echo.Context, p *principal) error {
	var in registryapi.SpendLimitUpdate
	if err := a.decode(c, &in); err != nil {
		return err
	}
	if err := checkSpendLimit(c.Param("currency"), in); err != nil {
		return err
	}
	out, err := a.st.setSpendLimit(c.Request().Context(), p, c.Param("name"), c.Param("currency"), in)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// checkSpendLimit validates a spend limit of currency.
func checkSpendLimit(currency string, in registryapi.SpendLimitUpdate) error {
	if !currencyRE.MatchString(currency) {
		return fieldErr("currency", "want an ISO 4217 code such as USD")
	}
	for _, f := range []struct {
		name string
		v    *int64
	}{{"alert_micros", in.AlertMicros}, {"limit_micros", in.LimitMicros}} {
		if f.v != nil && (*f.v < 0 || *f.v > registryapi.MaxSpendMicros) {
			return fieldErr(f.name, "want 0 to %d micro-units, or null for none", int64(registryapi.MaxSpendMicros))
		}
	}
	if in.AlertMicros != nil && in.LimitMicros != nil && *in.AlertMicros > *in.LimitMicros {
		return fieldErr("alert_micros", "is above limit_micros: the alert comes before the limit")
	}
	return nil
}
