package portal

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/web"
)

// router is a ServeMux that remembers its patterns (Routes).
type router struct {
	*http.ServeMux
	patterns []string
}

func (r *router) Handle(pattern string, h http.Handler) {
	r.patterns = append(r.patterns, pattern)
	r.ServeMux.Handle(pattern, h)
}

func (r *router) HandleFunc(pattern string, h func(http.ResponseWriter, *http.Request)) {
	r.Handle(pattern, http.HandlerFunc(h))
}

// Routes lists the portal's patterns ("GET /isv/keys"), for the
// authorization matrix of its tests.
func (p *Portal) Routes() []string { return slices.Clone(p.patterns) }

func (p *Portal) routes() http.Handler {
	mux := &router{ServeMux: http.NewServeMux()}
	mux.Handle("GET /static/", staticHandler())
	p.accountRoutes(mux)
	p.marketRoutes(mux)
	p.isvRoutes(mux)
	p.tenantRoutes(mux)
	p.adminRoutes(mux)
	p.isvUsageRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p.render(w, r, http.StatusNotFound, pageError, errorPage{Title: "Not found", Message: "There is no page at this address."})
	})
	p.patterns = mux.patterns
	// Cross-origin state changes are refused before any handler runs
	// (Sec-Fetch-Site and Origin), in addition to the CSRF tokens.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.render(w, r, http.StatusForbidden, pageError, errorPage{Title: "Request refused",
			Message: "This request came from another site. Use the portal's own pages."})
	}))
	return secure(cop.Handler(p.withSession(mux)))
}

// accountRoutes: sign-in, sign-out and API tokens.
func (p *Portal) accountRoutes(mux *router) {
	mux.HandleFunc("GET /signin", p.signinForm)
	mux.HandleFunc("POST /signin", p.signin)
	mux.HandleFunc("POST /signout", p.signout)
	mux.HandleFunc("GET /tokens", p.requireRole(p.tokens))
	mux.HandleFunc("POST /tokens", p.requireRole(p.createToken))
	mux.HandleFunc("POST /tokens/{id}/revoke", p.requireRole(p.revokeToken))
}

// marketRoutes: the marketplace, open to anonymous visitors.
func (p *Portal) marketRoutes(mux *router) {
	mux.HandleFunc("GET /{$}", p.market)
	mux.HandleFunc("GET /listings/{id}", p.listing)
	mux.HandleFunc("POST /listings/{id}/subscribe", p.requireRole(p.subscribe, auth.RoleTenant))
}

// asset is a static file with its validator.
type asset struct {
	data  []byte
	ctype string
	etag  string
}

// staticHandler serves web.Static from memory with strong ETags.
func staticHandler() http.Handler {
	assets := map[string]asset{}
	_ = fs.WalkDir(web.Static, "static", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(web.Static, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(name))
		if ct == "" || strings.HasSuffix(name, ".LICENSE") {
			ct = "text/plain; charset=utf-8"
		}
		assets["/"+name] = asset{data: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := assets[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "public, max-age=300")
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		_, _ = w.Write(a.data)
	})
}
