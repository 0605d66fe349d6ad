package portal_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// chrome is a headless Chromium tab that records console errors and CSP
// violations, and writes screenshots to $FAAS_PORTAL_SHOTS (make
// portal-shots) or a temporary folder.
type chrome struct {
	t     *testing.T
	ctx   context.Context
	shots string
	mu    sync.Mutex
	errs  []string
}

func newChrome(t *testing.T) *chrome {
	t.Helper()
	bin := testenv.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin),
		chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	c := &chrome{t: t, ctx: ctx, shots: os.Getenv("FAAS_PORTAL_SHOTS")}
	if c.shots == "" {
		c.shots = t.TempDir()
	} else if err := os.MkdirAll(c.shots, 0o755); err != nil {
		t.Fatal(err)
	}
	chromedp.ListenTarget(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				msg = "console.error"
			}
		case *log.EventEntryAdded:
			if e.Entry.Level == log.LevelError {
				msg = "log: " + e.Entry.Text
			}
		}
		if msg != "" {
			c.mu.Lock()
			c.errs = append(c.errs, msg)
			c.mu.Unlock()
		}
	})
	if err := chromedp.Run(ctx, log.Enable()); err != nil {
		t.Fatalf("chromium (%s): %v", bin, err)
	}
	return c
}

// run runs actions, failing the test with what on error.
func (c *chrome) run(what string, actions ...chromedp.Action) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, html string
		_ = chromedp.Run(c.ctx, chromedp.Location(&loc), chromedp.OuterHTML("main", &html, chromedp.ByQuery))
		c.t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, html)
	}
}

// shot screenshots the whole page as name.png.
func (c *chrome) shot(name string) {
	c.t.Helper()
	var png []byte
	c.run("screenshot "+name, chromedp.FullScreenshot(&png, 100))
	if err := os.WriteFile(filepath.Join(c.shots, name+".png"), png, 0o644); err != nil {
		c.t.Fatal(err)
	}
}

// clean fails the test on any console error or CSP violation so far.
func (c *chrome) clean(page string) {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		c.t.Errorf("%s: %s", page, e)
	}
	c.errs = nil
}

func (c *chrome) text(sel string) string {
	c.t.Helper()
	var s string
	c.run("text of "+sel, chromedp.Text(sel, &s, chromedp.ByQuery))
	return s
}

func TestBrowserJourneys(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	id := r.listing("acme", "Fast AES", "AES-256-GCM at **line rate** on both chips.\n\n- 100 Gb/s\n- sealed bitstream", true)
	r.listing("acme", "ResNet Inference", "int8 ResNet-50 on AliDNN.", true)

	c := newChrome(t)
	c.run("marketplace", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	if got := c.text(".cards"); !strings.Contains(got, "Fast AES") || !strings.Contains(got, "ResNet Inference") {
		t.Fatalf("marketplace cards: %q", got)
	}
	c.shot("01-marketplace")
	c.clean("marketplace")

	c.run("search", chromedp.SetValue("#q", "resnet", chromedp.ByID), chromedp.Submit("#q", chromedp.ByID),
		chromedp.WaitVisible(".cards", chromedp.ByQuery))
	if got := c.text(".cards"); strings.Contains(got, "Fast AES") || !strings.Contains(got, "ResNet") {
		t.Fatalf("search for resnet: %q", got)
	}

	// The tenant signs in from the listing page and comes back to it.
	c.run("listing", chromedp.Navigate(r.url+"/listings/"+id), chromedp.WaitVisible("h1", chromedp.ByQuery))
	c.shot("02-listing-signed-out")
	c.run("sign in", chromedp.Click(`main a[href^="/signin"]`, chromedp.ByQuery), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "alice", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.shot("03-signin")
	c.run("submit sign-in", chromedp.Submit("#password", chromedp.ByID), chromedp.WaitVisible(".facts", chromedp.ByQuery))
	var loc string
	c.run("location", chromedp.Location(&loc))
	if !strings.HasSuffix(loc, "/listings/"+id) {
		t.Fatalf("after sign-in at %s, want the listing", loc)
	}
	c.run("subscribe", chromedp.Click(`form[action$="/subscribe"] button`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if got := c.text(".flash"); !strings.Contains(got, "Subscribed") {
		t.Fatalf("after subscribing: %q", got)
	}
	c.shot("04-listing-subscribed")
	c.clean("tenant journey")

	c.run("tokens", chromedp.Navigate(r.url+"/tokens"), chromedp.WaitVisible("#token-name", chromedp.ByID),
		chromedp.SendKeys("#token-name", "laptop", chromedp.ByID), chromedp.Submit("#token-name", chromedp.ByID),
		chromedp.WaitVisible("#new-secret", chromedp.ByID))
	if got := c.text("#new-secret"); !strings.HasPrefix(got, "faas_") {
		t.Fatalf("new token secret %q", got)
	}
	c.shot("05-tokens")
	c.clean("tokens")
	c.run("sign out", chromedp.Click(`form[action="/signout"] button`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if got := c.text(".flash"); !strings.Contains(got, "signed out") {
		t.Fatalf("after sign-out: %q", got)
	}
}
