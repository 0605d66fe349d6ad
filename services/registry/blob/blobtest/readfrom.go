package blobtest

import (
	"io"
	"net"
	"net/http"
	"os"
	"sync"
)

// ReadFromRecorder passes a handler's http.ResponseWriter through and
// records what its ReadFrom is given: "file" or "tcp" when the kernel can
// copy (an *os.File or *net.TCPConn in an *io.LimitedReader), else "other".
type ReadFromRecorder struct {
	mu   sync.Mutex
	srcs []string
}

// Wrap returns h with its ResponseWriter recorded.
func (rec *ReadFromRecorder) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(recordingWriter{w, rec}, r)
	})
}

// Seen returns what ReadFrom was given since the last call.
func (rec *ReadFromRecorder) Seen() []string {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s := rec.srcs
	rec.srcs = nil
	return s
}

type recordingWriter struct {
	http.ResponseWriter
	rec *ReadFromRecorder
}

func (w recordingWriter) ReadFrom(r io.Reader) (int64, error) {
	kind := "other"
	if lr, ok := r.(*io.LimitedReader); ok {
		switch lr.R.(type) {
		case *os.File:
			kind = "file"
		case *net.TCPConn:
			kind = "tcp"
		}
	}
	w.rec.mu.Lock()
	w.rec.srcs = append(w.rec.srcs, kind)
	w.rec.mu.Unlock()
	return w.ResponseWriter.(io.ReaderFrom).ReadFrom(r)
}
