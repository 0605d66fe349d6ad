package portal_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestBrowserInvoicePrint: a tenant's invoice of the month running, on
// screen and printed: the print stylesheet leaves the document alone,
// without the site's header and footer or the page's controls.
func TestBrowserInvoicePrint(t *testing.T) {
	r := newRig(t)
	newFleet(r)
	c := newChrome(t)
	signInChrome(c, r.url, "alice")
	c.follow("invoices", chromedp.Navigate(r.url+"/my/invoices"), "article.statement")
	c.shot("45-invoice")
	c.clean("invoice")
	shown := func(sel string) bool {
		var ok bool
		c.run("is "+sel+" shown", chromedp.Evaluate(`(e => e !== null && e.getClientRects().length > 0)(document.querySelector("`+sel+`"))`, &ok))
		return ok
	}
	for _, sel := range []string{"header.top", "form.filters", "footer"} {
		if !shown(sel) {
			t.Fatalf("on screen, %s is hidden", sel)
		}
	}
	c.run("print media", emulation.SetEmulatedMedia().WithMedia("print"))
	for _, sel := range []string{"header.top", "form.filters", "footer", "p.hint"} {
		if shown(sel) {
			t.Errorf("printed, %s shows", sel)
		}
	}
	if !shown("article.statement table tfoot") {
		t.Fatal("printed, the invoice's total is hidden")
	}
	c.shot("46-invoice-print")
	var pdf []byte
	c.run("print to PDF", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		pdf, _, err = page.PrintToPDF().WithPrintBackground(false).Do(ctx)
		return err
	}))
	if len(pdf) < 1000 || string(pdf[:5]) != "%PDF-" {
		t.Fatalf("printed invoice: %d bytes", len(pdf))
	}
	if err := os.WriteFile(filepath.Join(c.shots, "46-invoice.pdf"), pdf, 0o644); err != nil {
		t.Fatal(err)
	}
}
