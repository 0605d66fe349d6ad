package portal

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
)

// maxInprocResponse bounds a response of the registry to an in-process
// push (challenges, upload locations, manifests: all small).
const maxInprocResponse = 4 << 20

// handlerTransport is an http.RoundTripper that serves requests with a
// handler in this process: the portal's pushes go through the registry's
// own /v2 handler, authorization and checks included, without a socket.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	w := newRecorder(maxInprocResponse)
	if req.Body == nil {
		req.Body = http.NoBody
	}
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
