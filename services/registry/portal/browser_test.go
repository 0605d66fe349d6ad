package portal_test

import (
	"context"
	"fmt"
	"net/http"
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

// refused forgets the console's record of a page answered with status,
// which the test expected (a refused form), and keeps every other error.
func (c *chrome) refused(status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	want := fmt.Sprintf("status of %d ", status)
	var kept []string
	for _, e := range c.errs {
		if !strings.Contains(e, want) {
			kept = append(kept, e)
		}
	}
	c.errs = kept
}

// follow runs act, which leaves the page (a link or a form), and waits for
// the next page to show sel. Waiting for sel alone is not enough: it can
// match the page being left, and a node of that page is gone under the
// next query ("No node with given id found").
func (c *chrome) follow(what string, act chromedp.Action, sel string) {
	c.t.Helper()
	c.run(what, chromedp.Evaluate(`document.documentElement.dataset.left = "1"`, nil), act)
	check := fmt.Sprintf(`!document.documentElement.dataset.left && document.readyState === "complete" &&
		(e => e !== null && e.getClientRects().length > 0)(document.querySelector(%q))`, sel)
	deadline := time.Now().Add(time.Minute)
	for {
		var ok bool
		// Errors are expected while the old page unloads.
		if err := chromedp.Run(c.ctx, chromedp.Evaluate(check, &ok)); err == nil && ok {
			return
		}
		if time.Now().After(deadline) || c.ctx.Err() != nil {
			var loc string
			_ = chromedp.Run(c.ctx, chromedp.Location(&loc))
			c.t.Fatalf("%s: no next page showing %s within a minute; at %s", what, sel, loc)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// focused waits up to ten seconds for the element with id want to hold the
// focus and returns the id of the one that does. Chromium moves the focus
// to an autofocus field at the page's first rendering update, which under
// load comes after follow has seen the page complete.
func (c *chrome) focused(want string) string {
	c.t.Helper()
	var id string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c.run("focus", chromedp.Evaluate(`document.activeElement ? document.activeElement.id : ""`, &id))
		if id == want || time.Now().After(deadline) {
			return id
		}
	}
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

	c.run("search terms", chromedp.SetValue("#q", "resnet", chromedp.ByID))
	c.follow("search", chromedp.Submit("#q", chromedp.ByID), ".cards")
	if got := c.text(".cards"); strings.Contains(got, "Fast AES") || !strings.Contains(got, "ResNet") {
		t.Fatalf("search for resnet: %q", got)
	}

	// The tenant signs in from the listing page and comes back to it.
	c.run("listing", chromedp.Navigate(r.url+"/listings/"+id), chromedp.WaitVisible("h1", chromedp.ByQuery))
	c.shot("02-listing-signed-out")
	var bare struct{ ID string }
	r.api("acme", http.MethodPost, "/listings", map[string]any{"name": "Bare Loopback", "repository": "acme/loopback", "visibility": "public"}, &bare)
	r.api("acme", http.MethodPost, "/listings/"+bare.ID+"/publish", nil, nil)
	c.run("bare listing", chromedp.Navigate(r.url+"/listings/"+bare.ID), chromedp.WaitVisible(".facts", chromedp.ByQuery))
	if got := c.text(".facts"); strings.Contains(got, "Board") || !strings.Contains(got, "Free") {
		t.Fatalf("a listing without board or price: %q", got)
	}
	c.shot("02a-listing-bare-signed-out")
	c.run("listing", chromedp.Navigate(r.url+"/listings/"+id), chromedp.WaitVisible("h1", chromedp.ByQuery))
	c.follow("sign in", chromedp.Click(`main a[href^="/signin"]`, chromedp.ByQuery), "#name")
	c.run("credentials", chromedp.SendKeys("#name", "alice", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.shot("03-signin")
	c.follow("submit sign-in", chromedp.Submit("#password", chromedp.ByID), ".facts")
	var loc string
	c.run("location", chromedp.Location(&loc))
	if !strings.HasSuffix(loc, "/listings/"+id) {
		t.Fatalf("after sign-in at %s, want the listing", loc)
	}
	c.follow("subscribe", chromedp.Click(`form[action$="/subscribe"] button`, chromedp.ByQuery), ".flash")
	if got := c.text(".flash"); !strings.Contains(got, "Subscribed") {
		t.Fatalf("after subscribing: %q", got)
	}
	c.shot("04-listing-subscribed")
	c.clean("tenant journey")

	c.run("tokens", chromedp.Navigate(r.url+"/tokens"), chromedp.WaitVisible("#token-name", chromedp.ByID),
		chromedp.SendKeys("#token-name", "laptop", chromedp.ByID))
	c.follow("new token", chromedp.Submit("#token-name", chromedp.ByID), "#new-secret")
	if got := c.text("#new-secret"); !strings.HasPrefix(got, "faas_") {
		t.Fatalf("new token secret %q", got)
	}
	c.shot("05-tokens")
	c.clean("tokens")
	c.follow("sign out", chromedp.Click(`form[action="/signout"] button`, chromedp.ByQuery), ".flash")
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
	img := r.buildImage("dual-dnn", "alidnn-dual", false, key)
	dir := t.TempDir()
	tarPath, keysPath := filepath.Join(dir, "image.tar"), filepath.Join(dir, "layout.keys.json")
	os.WriteFile(tarPath, img.tar, 0o600)
	os.WriteFile(keysPath, img.keys, 0o600)

	c := newChrome(t)
	c.run("sign in", chromedp.Navigate(r.url+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "acme", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.follow("submit sign-in", chromedp.Submit("#password", chromedp.ByID), "form[action='/signout']")
	c.run("dashboard", chromedp.Navigate(r.url+"/isv"), chromedp.WaitVisible(".warn", chromedp.ByQuery))
	c.shot("10-isv-dashboard-empty")

	c.run("register key", chromedp.Navigate(r.url+"/isv/keys"), chromedp.WaitVisible("#pem", chromedp.ByID),
		chromedp.SetValue("#pem", string(pub), chromedp.ByID))
	c.follow("submit key", chromedp.Submit("#pem", chromedp.ByID), "main .ok")
	if got := c.text("main .ok"); !strings.Contains(got, "Fingerprint") {
		t.Fatalf("after registering the key: %q", got)
	}
	c.shot("11-isv-keys")
	c.clean("keys")

	c.run("new listing", chromedp.Navigate(r.url+"/isv/listings/new"), chromedp.WaitVisible("#l-name", chromedp.ByID),
		chromedp.SendKeys("#l-name", "Dual DNN", chromedp.ByID), chromedp.SendKeys("#l-repo", "acme/dual-dnn", chromedp.ByID),
		chromedp.SendKeys("#l-summary", "int8 CNN inference on both chips", chromedp.ByID),
		chromedp.SendKeys("#l-desc", "Runs **ResNet** and MNIST.\n\n- int8\n- two chips", chromedp.ByID),
		chromedp.SendKeys("#l-cat", "ml", chromedp.ByID), chromedp.SendKeys("#l-board", "faas-vu9p-2", chromedp.ByID),
		chromedp.SendKeys("#l-pph", "2.40", chromedp.ByID))
	c.shot("12-isv-listing-new")
	// The namespace is fixed text: typing it again is refused on the field,
	// which has the focus.
	c.follow("create listing", chromedp.Submit("#l-name", chromedp.ByID), "#l-repo-err")
	if got, focused := c.text("#l-repo-err"), c.focused("l-repo"); focused != "l-repo" || !strings.Contains(got, "acme/ is there already") {
		t.Fatalf("repository typed with its namespace: focus on %q, beside it %q", focused, got)
	}
	c.shot("12a-isv-listing-field-error")
	c.refused(http.StatusUnprocessableEntity)
	c.run("repository name", chromedp.SetValue("#l-repo", "dual-dnn", chromedp.ByID))
	c.follow("create listing", chromedp.Submit("#l-name", chromedp.ByID), ".flash")
	c.shot("13-isv-listing-edit")

	c.follow("publish form", chromedp.Click(`a[href^="/isv/publish?listing="]`, chromedp.ByQuery), "#p-layout")
	c.run("publish fields", chromedp.SendKeys("#p-version", "1.0.0", chromedp.ByID),
		chromedp.SetUploadFiles("#p-keys", []string{keysPath}, chromedp.ByID),
		chromedp.SetUploadFiles("#p-layout", []string{tarPath}, chromedp.ByID))
	c.shot("14-isv-publish")
	c.follow("upload", chromedp.Click(`form[data-upload] button[type=submit]`, chromedp.ByQuery), "#validation")
	// The page follows validation by itself (htmx polling) until it ends.
	c.run("validation", chromedp.WaitVisible(`#validation .state.available`, chromedp.ByQuery))
	c.shot("15-isv-version-available")
	c.clean("publish")

	c.follow("listing", chromedp.Click(`.crumbs a[href^="/isv/listings/"]`, chromedp.ByQuery), `form[action$="/publish"] button`)
	c.follow("publish listing", chromedp.Click(`form[action$="/publish"] button`, chromedp.ByQuery), ".flash")
	if got := c.text(".flash"); !strings.Contains(got, "published") {
		t.Fatalf("after publishing: %q", got)
	}
	c.run("dashboard", chromedp.Navigate(r.url+"/isv"), chromedp.WaitVisible(".panel", chromedp.ByQuery))
	c.shot("16-isv-dashboard")
	c.follow("sign out", chromedp.Click(`form[action="/signout"] button`, chromedp.ByQuery), ".flash")

	// The tenant.
	c.run("tenant sign in", chromedp.Navigate(r.url+"/signin"), chromedp.WaitVisible("#name", chromedp.ByID),
		chromedp.SendKeys("#name", "alice", chromedp.ByID), chromedp.SendKeys("#password", password, chromedp.ByID))
	c.follow("tenant submit sign-in", chromedp.Submit("#password", chromedp.ByID), "#loads-h")
	c.run("marketplace", chromedp.Navigate(r.url+"/"), chromedp.WaitVisible(".cards", chromedp.ByQuery))
	c.follow("tenant listing", chromedp.Click(`.card a`, chromedp.ByQuery), `form[action$="/subscribe"] button`)
	c.follow("tenant subscribe", chromedp.Click(`form[action$="/subscribe"] button`, chromedp.ByQuery), "main .ok")
	line := c.text("#load-line")
	if !strings.HasPrefix(line, "faas load ") || !strings.HasSuffix(line, "/acme/dual-dnn:1.0.0") {
		t.Fatalf("load line %q", line)
	}
	c.shot("17-tenant-listing-subscribed")
	c.clean("tenant")
}
