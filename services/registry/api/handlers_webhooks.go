package api

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/webhooks"
)

// checkWebhookURL refuses URLs deliveries may not go to, as a field error.
func (a *API) checkWebhookURL(u string) error {
	if err := webhooks.CheckURL(u, a.cfg.WebhookAllowLoopback); err != nil {
		if errors.Is(err, webhooks.ErrAddress) {
			return fieldErr("url", "%s", strings.TrimPrefix(err.Error(), "webhooks: "))
		}
		return err
	}
	return nil
}

func checkEvents(events []string) error {
	if len(events) == 0 || len(events) > len(registryapi.EventTypes) {
		return fieldErr("events", "want 1 to %d event types", len(registryapi.EventTypes))
	}
	for i, e := range events {
		if !slices.Contains(registryapi.EventTypes, e) {
			return fieldErr("events", "unknown event type %q", e)
		}
		if slices.Contains(events[:i], e) {
			return fieldErr("events", "%q twice", e)
		}
	}
	return nil
}

func checkDescription(d string) error {
	if len(d) > registryapi.MaxWebhookDescription {
		return fieldErr("description", "at most %d bytes", registryapi.MaxWebhookDescription)
	}
	return nil
}

func (a *API) createWebhook(c echo.Context, p *principal) error {
	var req registryapi.NewWebhook
	if err := a.decode(c, &req); err != nil {
		return err
	}
	if err := cmp.Or(a.checkWebhookURL(req.URL), checkEvents(req.Events), checkDescription(req.Description)); err != nil {
		return err
	}
	w, err := a.st.createWebhook(c.Request().Context(), p, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, w)
}

func (a *API) listWebhooks(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listWebhooks(c.Request().Context(), p.ID, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Webhook) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) getWebhook(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: no such webhook of yours", ErrNotFound)
	}
	w, err := a.st.getWebhook(c.Request().Context(), p.ID, id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (a *API) updateWebhook(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: no such webhook of yours", ErrNotFound)
	}
	var req registryapi.WebhookUpdate
	if err := a.decode(c, &req); err != nil {
		return err
	}
	var errURL, errEvents, errDesc error
	if req.URL != nil {
		errURL = a.checkWebhookURL(*req.URL)
	}
	if req.Events != nil {
		errEvents = checkEvents(req.Events)
	}
	if req.Description != nil {
		errDesc = checkDescription(*req.Description)
	}
	if err := cmp.Or(errURL, errEvents, errDesc); err != nil {
		return err
	}
	w, err := a.st.updateWebhook(c.Request().Context(), p, id, req)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, w)
}

func (a *API) deleteWebhook(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: no such webhook of yours", ErrNotFound)
	}
	if err := a.st.deleteWebhook(c.Request().Context(), p, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) listDeliveries(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: no such webhook of yours", ErrNotFound)
	}
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	rows, err := a.st.listDeliveries(c.Request().Context(), p.ID, id, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.WebhookDelivery) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) redeliver(c echo.Context, p *principal) error {
	id, did := c.Param("id"), c.Param("delivery")
	if !isUUID(id) || !isUUID(did) {
		return fmt.Errorf("%w: no such delivery of yours", ErrNotFound)
	}
	d, err := a.st.redeliver(c.Request().Context(), p, id, did)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, d)
}

func (a *API) listNotifications(c echo.Context, p *principal) error {
	pg, err := parsePage(c)
	if err != nil {
		return err
	}
	unread := false
	if s := c.QueryParam("unread"); s != "" {
		if unread, err = strconv.ParseBool(s); err != nil {
			return fieldErr("unread", "want true or false")
		}
	}
	rows, err := a.st.listNotifications(c.Request().Context(), p.ID, unread, pg)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, pageOf(rows, pg.limit, func(x registryapi.Notification) cursor { return cursor{x.CreatedAt, x.ID} }))
}

func (a *API) markNotificationRead(c echo.Context, p *principal) error {
	id := c.Param("id")
	if !isUUID(id) {
		return fmt.Errorf("%w: no such notification of yours", ErrNotFound)
	}
	if err := a.st.markRead(c.Request().Context(), p, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
