package portal

import (
	"fmt"
	"html/template"

	"github.com/fpga-faas/faas/web"
)

// page is a template of web/templates. It is not a string so that a bare
// name, misspelt or not, does not compile; pageFiles names its file, and
// TestPageTemplates pairs the two.
type page int

const (
	pageAdminAccounts page = iota
	pageAdminNodes
	pageAdminValidation
	pageAudit
	pageCodes
	pageError
	pageISV
	pageISVUsage
	pageKeys
	pageListing
	pageListingEdit
	pageMarket
	pageMy
	pageNotifications
	pagePublish
	pageSignin
	pageSpendLimit
	pageStatements
	pageTokens
	pageUnsubscribe
	pageVersion
	pageWebhook
	pageWebhooks
	numPages
)

// pageFiles are the pages' files in web/templates, without ".html".
var pageFiles = [numPages]string{
	pageAdminAccounts:   "admin_accounts",
	pageAdminNodes:      "admin_nodes",
	pageAdminValidation: "admin_validation",
	pageAudit:           "audit",
	pageCodes:           "codes",
	pageError:           "error",
	pageISV:             "isv",
	pageISVUsage:        "isv_usage",
	pageKeys:            "keys",
	pageListing:         "listing",
	pageListingEdit:     "listing_edit",
	pageMarket:          "market",
	pageMy:              "my",
	pageNotifications:   "notifications",
	pagePublish:         "publish",
	pageSignin:          "signin",
	pageSpendLimit:      "spend_limit",
	pageStatements:      "statements",
	pageTokens:          "tokens",
	pageUnsubscribe:     "unsubscribe",
	pageVersion:         "version",
	pageWebhook:         "webhook",
	pageWebhooks:        "webhooks",
}

func (pg page) String() string { return pageFiles[pg] }

// layoutTemplate is the frame around every page: its file and its block.
const layoutTemplate = "layout"

// pages are the parsed templates: the layout with each page's "content".
type pages struct {
	byName [numPages]*template.Template
}

// loadPages parses every page, so that a page without its file stops New
// rather than a visitor's request.
func loadPages() (*pages, error) {
	layout, err := template.New(layoutTemplate+".html").Funcs(funcs).ParseFS(web.Templates, "templates/"+layoutTemplate+".html")
	if err != nil {
		return nil, fmt.Errorf("portal: layout: %w", err)
	}
	pg := &pages{}
	for name := range numPages {
		t, err := template.Must(layout.Clone()).ParseFS(web.Templates, "templates/"+name.String()+".html")
		if err != nil {
			return nil, fmt.Errorf("portal: template %s: %w", name, err)
		}
		pg.byName[name] = t
	}
	return pg, nil
}
