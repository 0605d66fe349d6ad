package validation

import (
	"io"
	"net/http"
	"strconv"
	"sync"
)

// handlerTransport is an http.RoundTripper that serves requests with an
// in-process handler, streaming the response body through a pipe (layers
// are never buffered whole). The scheme and host of the request are ignored.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, body: pw, ready: make(chan struct{})}
	r := req.Clone(req.Context())
	if r.Body == nil {
		r.Body = http.NoBody
	}
	r.RequestURI = r.URL.RequestURI()
	r.RemoteAddr = "127.0.0.1:0"
	go func() {
		defer func() {
			w.WriteHeader(http.StatusOK) // no-op when already written
			pw.Close()
		}()
		t.h.ServeHTTP(w, r)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		pr.CloseWithError(req.Context().Err())
		return nil, req.Context().Err()
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		Body:          pr,
		ContentLength: -1,
		Request:       req,
	}
	if cl, err := strconv.ParseInt(w.sent.Get("Content-Length"), 10, 64); err == nil {
		resp.ContentLength = cl
	}
	if req.Method == http.MethodHead {
		pr.Close()
		resp.Body = http.NoBody
	}
	return resp, nil
}

// pipeWriter is the http.ResponseWriter of handlerTransport.
type pipeWriter struct {
	header http.Header
	sent   http.Header
	status int
	body   *io.PipeWriter
	once   sync.Once
	ready  chan struct{}
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() {
		w.status = code
		w.sent = w.header.Clone()
		close(w.ready)
	})
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}
