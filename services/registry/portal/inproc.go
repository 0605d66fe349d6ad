package portal

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"

	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// API is what the portal needs of the marketplace API: to serve a request
// as an account it has signed in itself (api.API.ServeAs).
type API interface {
	ServeAs(w http.ResponseWriter, r *http.Request, acct *auth.Account)
}

// maxInprocResponse bounds a response of the registry to an in-process
// push (challenges, upload locations, manifests: all small).
const maxInprocResponse = 4 << 20

// apiBase is the base URL of the portal's client of the API. Its
// transport serves every request in process, so the host is never
// resolved or dialled: it only has to be a URL the client accepts.
const apiBase = "http://portal.internal"

// apiAs returns a client of the API acting as acct (nil: anonymous). The
// portal has signed acct in itself, so the client carries no credentials:
// its transport serves each request with API.ServeAs, and the API applies
// acct's roles, audit and validation as to acct's own requests. No client
// timeout: the page's request context bounds the call, and a timeout
// would cost every call a timer goroutine.
func (p *Portal) apiAs(acct *auth.Account) *registryclient.Client {
	serve := func(w http.ResponseWriter, r *http.Request) { p.cfg.API.ServeAs(w, r, acct) }
	t := handlerTransport{h: http.HandlerFunc(serve), max: registryclient.MaxAnswerBytes}
	return p.api.As(registryclient.WithHTTPClient(&http.Client{Transport: t}))
}

// inprocRegistry names the registry in the portal's pushes: never
// resolved or dialled, as registryTransport serves them.
const inprocRegistry = "registry.invalid"

// registryTransport serves requests with the registry's /v2 handler.
func (p *Portal) registryTransport() http.RoundTripper {
	return handlerTransport{h: p.cfg.Registry, max: maxInprocResponse}
}

// recorder is a minimal in-memory http.ResponseWriter holding at most max
// bytes of body; err records a handler writing more.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
	max    int
	err    error
}

func newRecorder(max int) *recorder { return &recorder{h: http.Header{}, max: max} }

func (r *recorder) Header() http.Header { return r.h }
func (r *recorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if r.body.Len()+len(p) > r.max {
		r.err = fmt.Errorf("portal: in-process response over %d bytes", r.max)
		return 0, r.err
	}
	return r.body.Write(p)
}

// handlerTransport is an http.RoundTripper that serves requests with a
// handler in this process, without a socket: the portal's pushes go
// through the registry's own /v2 handler, and its API calls through the
// API (apiAs), authorization and checks included. A response over max
// bytes is an error rather than a truncated answer.
type handlerTransport struct {
	h   http.Handler
	max int
}

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := newRecorder(t.max)
	if req.Body == nil {
		req.Body = http.NoBody
	}
	defer req.Body.Close()
	// The handler sees a server request: no scheme or host in the URL.
	sreq := req.Clone(req.Context())
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "127.0.0.1:0"
	if req.URL.Scheme == "https" {
		// As if over TLS, so that the registry's challenges name an https
		// realm, which clients require of a registry reached by https.
		sreq.TLS = &tls.ConnectionState{}
	}
	t.h.ServeHTTP(w, sreq)
	if w.err != nil {
		return nil, w.err
	}
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return &http.Response{
		Status: fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)), StatusCode: w.status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.h, Body: io.NopCloser(bytes.NewReader(w.body.Bytes())), ContentLength: int64(w.body.Len()),
		Request: req,
	}, nil
}
