package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// waitParam parses ?wait= (a Go duration or seconds), at most maxWait.
func waitParam(c echo.Context) (time.Duration, error) {
	s := c.QueryParam("wait")
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		n, nerr := strconv.Atoi(s)
		d, err = time.Duration(n)*time.Second, nerr
	}
	if err != nil || d < 0 || d > maxWait {
		return 0, fieldErr("wait", "want a duration between 0 and %v", maxWait)
	}
	return d, nil
}

func (a *API) createAttachment(c echo.Context, p *principal) error {
	var req poolapi.AttachRequest
	if err := a.decode(c, &req); err != nil {
		return err
	}
	switch {
	case req.Listing == "" || len(req.Listing) > 256:
		return fieldErr("listing", "want a listing id or repository of at most 256 bytes")
	case len(req.Version) > 128:
		return fieldErr("version", "at most 128 bytes")
	case req.LeaseSeconds != 0 && (req.LeaseSeconds < poolapi.MinLeaseSeconds || req.LeaseSeconds > poolapi.MaxLeaseSeconds):
		return fieldErr("lease_seconds", "want %d to %d", poolapi.MinLeaseSeconds, poolapi.MaxLeaseSeconds)
	}
	if len(req.ExcludeNodes) > poolapi.MaxExcludeNodes {
		return fieldErr("exclude_nodes", "at most %d node ids", poolapi.MaxExcludeNodes)
	}
	for _, id := range req.ExcludeNodes {
		if !isUUID(id) {
			return fieldErr("exclude_nodes", "want node ids; %.64q is none", id)
		}
	}
	att, err := a.st.createAttachment(c.Request().Context(), p, a.cfg.Attach.withDefaults(), req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, att)
}

func (a *API) listAttachments(c echo.Context, p *principal) error {
	all := c.QueryParam("all") == "true"
	if all && !p.is(auth.RoleAdmin) {
		return fieldErr("all", "only an admin lists everyone's attachments")
	}
	out, err := a.st.listAttachments(c.Request().Context(), p, all, MaxLimit)
	if err != nil {
		return err
	}
	if out == nil {
		out = []poolapi.Attachment{}
	}
	return c.JSON(http.StatusOK, poolapi.AttachmentList{Attachments: out})
}

// getAttachment answers at once, or with ?wait= once the state differs
// from ?since= (a long poll for the SDK waiting for ready).
func (a *API) getAttachment(c echo.Context, p *principal) error {
	wait, err := waitParam(c)
	if err != nil {
		return err
	}
	since := poolapi.State(c.QueryParam("since"))
	ctx := c.Request().Context()
	var att poolapi.Attachment
	err = a.poll(ctx, p.ID, wait, func() (bool, error) {
		var err error
		att, err = a.st.getAttachment(ctx, p, c.Param("id"))
		return since == "" || att.State != since, err
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, att)
}

func (a *API) renewAttachment(c echo.Context, p *principal) error {
	att, err := a.st.renewAttachment(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, att)
}

func (a *API) detachAttachment(c echo.Context, p *principal) error {
	att, err := a.st.detachAttachment(c.Request().Context(), p, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, att)
}

// assignments answers a node's long poll: its desired state, once its
// revision passes ?since=.
func (a *API) assignments(c echo.Context, p *principal) error {
	wait, err := waitParam(c)
	if err != nil {
		return err
	}
	var since int64
	if s := c.QueryParam("since"); s != "" {
		if since, err = strconv.ParseInt(s, 10, 64); err != nil || since < 0 {
			return fieldErr("since", "want a revision (a non-negative integer)")
		}
	}
	ctx := c.Request().Context()
	id := c.Param("id")
	if err := ownNode(ctx, a.cfg.DB, p, id); err != nil {
		return err
	}
	err = a.poll(ctx, p.ID, wait, func() (bool, error) {
		rev, err := a.st.revision(ctx, id)
		return rev > since, err
	})
	if err != nil {
		return err
	}
	out, err := a.st.assignments(ctx, p, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) attachmentGrant(c echo.Context, p *principal) error {
	g, err := a.st.attachmentGrant(c.Request().Context(), p, c.Param("id"), c.Param("aid"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, g)
}

func (a *API) reportAttachment(c echo.Context, p *principal) error {
	var r poolapi.StateReport
	if err := a.decode(c, &r); err != nil {
		return err
	}
	if len(r.Slots) > 2 {
		return fieldErr("slots", "at most 2")
	}
	if err := a.st.reportAttachment(c.Request().Context(), p, c.Param("id"), c.Param("aid"), r); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
