package portal

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/web"
)

// TestPageTemplates pairs the pages with web/templates: each page names a
// file of its own there, and each file but the layout is a page, so that a
// page added on one side only fails here rather than for a visitor.
func TestPageTemplates(t *testing.T) {
	paths, err := fs.Glob(web.Templates, "templates/*.html")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, p := range paths {
		if name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html"); name != layoutTemplate {
			files[name] = true
		}
	}
	named := map[string]page{}
	for pg := range numPages {
		name := pg.String()
		switch other, dup := named[name]; {
		case name == "":
			t.Errorf("page %d has no file in pageFiles", pg)
		case dup:
			t.Errorf("pages %d and %d are both templates/%s.html", other, pg, name)
		case !files[name]:
			t.Errorf("page %s: no templates/%s.html", name, name)
		}
		named[name] = pg
	}
	for name := range files {
		if _, ok := named[name]; !ok {
			t.Errorf("templates/%s.html is no page: add a page constant and its pageFiles entry", name)
		}
	}
	if _, err := loadPages(); err != nil {
		t.Error(err)
	}
}
