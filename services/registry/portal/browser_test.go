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

	"github.com/fpga-faas/faas/hdk/sign"
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
		chromedp.Flag("disable-background-networking", true), chromedp.WindowSize(1280, 1500))
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
	ctx, cancel := context.WithTimeout(c.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		var loc, html string
		_ = chromedp.Run(c.ctx, chromedp.Location(&loc), chromedp.OuterHTML("main", &html, chromedp.ByQuery))
		c.t.Fatalf("%s: %v\nat %s:\n%s", what, err, loc, html)
	}
}

// shot screenshots the window (1280×1500) as name.png. Not
// FullScreenshot: it resizes the view to the page, and under load that
// hung now and then.
func (c *chrome) shot(name string) {
	c.t.Helper()
	var png []byte
	c.run("screenshot "+name, chromedp.CaptureScreenshot(&png))
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

// TestBrowserISVJourney: an ISV signs in, registers its key, creates a
// listing, uploads a signed, sealed image with a progress bar, watches it
// validate and publishes the listing; then a tenant finds it, subscribes
// and copies the `faas load` line.
func TestBrowserISVJourney(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	r.user("alice", auth.RoleTenant)
	key, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := sign.MarshalPublicKey(key.Public())
	img := r.buildImage("alidnn-dual", false, key)
	dir := t.TempDir()
	tarPath, keysPath := filepath.Join(dir, "image.tar"), filepath.Join(dir, "layout.keys.json")
	os.WriteFile(tarPath, img.tar, 0o600)
	os.WriteFile(keysPath, img.keys, 0o600)

	c := newChrome(t)
	c.run("sign in", chromedp.Navigate(r.url+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "acme", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID),
		chromedp.Submit("#password", chromedp.ByID), chromedp.WaitVisible(".cards, main h1", chromedp.ByQuery))
	c.run("dashboard", chromedp.Navigate(r.url+"/isv"), chromedp.WaitVisible(".warn", chromedp.ByQuery))
	c.shot("10-isv-dashboard-empty")

	c.run("register key", chromedp.Navigate(r.url+"/isv/keys"), chromedp.WaitVisible("#pem", chromedp.ByID),
		chromedp.SetValue("#pem", string(pub), chromedp.ByID), chromedp.Submit("#pem", chromedp.ByID),
		chromedp.WaitVisible("main .ok", chromedp.ByQuery))
	if got := c.text("main .ok"); !strings.Contains(got, "Fingerprint") {
		t.Fatalf("after registering the key: %q", got)
	}
	c.shot("11-isv-keys")
	c.clean("keys")

	c.run("new listing", chromedp.Navigate(r.url+"/isv/listings/new"), chromedp.WaitVisible("#l-name", chromedp.ByID),
		chromedp.SendKeys("#l-name", "Dual DNN", chromedp.ByID), chromedp.SetValue("#l-repo", "acme/dual-dnn", chromedp.ByID),
		chromedp.SendKeys("#l-summary", "int8 CNN inference on both chips", chromedp.ByID),
		chromedp.SendKeys("#l-desc", "Runs **ResNet** and MNIST.\n\n- int8\n- two chips", chromedp.ByID),
		chromedp.SendKeys("#l-cat", "ml", chromedp.ByID), chromedp.SendKeys("#l-board", "faas-vu9p-2", chromedp.ByID),
		chromedp.SendKeys("#l-pph", "2.40", chromedp.ByID))
	c.shot("12-isv-listing-new")
	c.run("create listing", chromedp.Submit("#l-name", chromedp.ByID), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	c.shot("13-isv-listing-edit")

	c.run("publish form", chromedp.Click(`a[href^="/isv/publish?listing="]`, chromedp.ByQuery), chromedp.WaitVisible("#p-layout", chromedp.ByID),
		chromedp.SendKeys("#p-version", "1.0.0", chromedp.ByID),
		chromedp.SetUploadFiles("#p-keys", []string{keysPath}, chromedp.ByID),
		chromedp.SetUploadFiles("#p-layout", []string{tarPath}, chromedp.ByID))
	c.shot("14-isv-publish")
	c.run("upload", chromedp.Click(`form[data-upload] button[type=submit]`, chromedp.ByQuery),
		chromedp.WaitVisible("#validation", chromedp.ByID))
	// The page follows validation by itself (htmx polling) until it ends.
	c.run("validation", chromedp.WaitVisible(`#validation .state.available`, chromedp.ByQuery))
	c.shot("15-isv-version-available")
	c.clean("publish")

	c.run("publish listing", chromedp.Click(`.crumbs a[href^="/isv/listings/"]`, chromedp.ByQuery),
		chromedp.WaitVisible(`form[action$="/publish"] button`, chromedp.ByQuery),
		chromedp.Click(`form[action$="/publish"] button`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))
	if got := c.text(".flash"); !strings.Contains(got, "published") {
		t.Fatalf("after publishing: %q", got)
	}
	c.run("dashboard", chromedp.Navigate(r.url+"/isv"), chromedp.WaitVisible(".panel", chromedp.ByQuery))
	c.shot("16-isv-dashboard")
	c.run("sign out", chromedp.Click(`form[action="/signout"] button`, chromedp.ByQuery), chromedp.WaitVisible(".flash", chromedp.ByQuery))

	// The tenant.
	c.run("tenant sign in", chromedp.Navigate(r.url+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "alice", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID),
		chromedp.Submit("#password", chromedp.ByID), chromedp.WaitVisible(".cards", chromedp.ByQuery),
		chromedp.Click(`.card a`, chromedp.ByQuery), chromedp.WaitVisible(`form[action$="/subscribe"] button`, chromedp.ByQuery),
		chromedp.Click(`form[action$="/subscribe"] button`, chromedp.ByQuery), chromedp.WaitVisible("#load-line", chromedp.ByID))
	line := c.text("#load-line")
	if !strings.HasPrefix(line, "faas load ") || !strings.HasSuffix(line, "/acme/dual-dnn:1.0.0") {
		t.Fatalf("load line %q", line)
	}
	c.shot("17-tenant-listing-subscribed")
	c.clean("tenant")
}
