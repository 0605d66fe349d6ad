package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/labstack/echo/v4"
)

func (a *API) reportUsage(c echo.Context, p *principal) error {
	var req registryapi.UsageReport
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if !isUUID(req.NodeID) {
		return fieldErr("node_id", "want a node id")
	}
	if len(req.Records) == 0 || len(req.Records) > registryapi.MaxUsageRecords {
		return fieldErr("records", "want 1 to %d records", registryapi.MaxUsageRecords)
	}
	for i, r := range req.Records {
		f := func(n string) string { return fmt.Sprintf("records[%d].%s", i, n) }
		switch {
		case r.ReportID == "" || len(r.ReportID) > 128:
			return fieldErr(f("report_id"), "required, at most 128 bytes")
		case !isUUID(r.TenantID):
			return fieldErr(f("tenant_id"), "want an account id")
		case !isUUID(r.GrantID):
			return fieldErr(f("grant_id"), "want the id of the load grant the load was made under")
		case r.ListingID != nil && !isUUID(*r.ListingID):
			return fieldErr(f("listing_id"), "want a listing id")
		case r.ManifestDigest != nil && !digestRE.MatchString(*r.ManifestDigest):
			return fieldErr(f("digest"), "malformed")
		case r.Event != "load" && r.Event != "clear" && r.Event != "busy":
			return fieldErr(f("event"), "want load, clear or busy")
		case r.BusyNs < 0:
			return fieldErr(f("busy_ns"), "must not be negative")
		case r.Slot != nil && (*r.Slot < 0 || *r.Slot > 1024):
			return fieldErr(f("slot"), "out of range")
		case len(r.Board) > 64:
			return fieldErr(f("board"), "at most 64 bytes")
		}
	}
	n, err := a.st.recordUsage(c.Request().Context(), p, req.NodeID, req.Records)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, registryapi.UsageAccepted{Accepted: n, Duplicates: len(req.Records) - n})
}

func parseTime(c echo.Context, name string) (*time.Time, error) {
	s := c.QueryParam(name)
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return nil, fieldErr(name, "want an RFC 3339 time")
	}
	return &t, nil
}

func (a *API) usageSummary(c echo.Context, p *principal) error {
	from, err := parseTime(c, "from")
	if err != nil {
		return err
	}
	to, err := parseTime(c, "to")
	if err != nil {
		return err
	}
	listing := c.QueryParam("listing_id")
	var perDay bool
	switch c.QueryParam("by") {
	case "":
	case "day":
		perDay = true
	default:
		return fieldErr("by", "want day, or leave it out")
	}
	rows, err := a.st.usageSummary(c.Request().Context(), p, from, to, listing, perDay)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []registryapi.UsageSummary{}
	}
	var total int64
	for _, r := range rows {
		total += r.TotalMicros
	}
	return c.JSON(http.StatusOK, registryapi.UsageSummaries{Items: rows, TotalMicros: total})
}
