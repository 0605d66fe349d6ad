package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"time"
)

// extensions are the protocol extensions the server metadata names.
var extensions = []string{"binary_tensor_data", "model_repository"}

// Platform is what model metadata gives as every model's platform.
const Platform = "alidnn"

// statusClientClosed is what a request whose client went away is counted
// as.
const statusClientClosed = 499

// headerLength is the binary tensor data extension's header giving the
// length of the JSON at the start of a body.
const headerLength = "Inference-Header-Content-Length"

// Handler serves the Open Inference Protocol's REST API under /v2.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v2/health/live", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		if !s.Live() {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, map[string]bool{"live": s.Live()})
	})
	mux.HandleFunc("GET /v2/health/ready", func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusOK
		if !s.Ready() {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, map[string]bool{"ready": s.Ready()})
	})
	mux.HandleFunc("GET /v2", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"name": s.cfg.Name, "version": s.cfg.Version, "extensions": extensions})
	})
	for _, prefix := range []string{"/v2/models/{model}", "/v2/models/{model}/versions/{version}"} {
		mux.HandleFunc("GET "+prefix, s.modelMetadata)
		mux.HandleFunc("GET "+prefix+"/ready", s.modelReady)
		mux.HandleFunc("POST "+prefix+"/infer", s.handleInfer)
	}
	s.repositoryRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, fmt.Errorf("%w: no endpoint %s %s", ErrNotFound, r.Method, r.URL.Path))
	})
	return s.authenticate(mux)
}

type metadataTensor struct {
	Name     string  `json:"name"`
	Datatype string  `json:"datatype"`
	Shape    []int64 `json:"shape"`
}

func metadataTensors(ts []tensorSpec) []metadataTensor {
	out := make([]metadataTensor, len(ts))
	for k, t := range ts {
		out[k] = metadataTensor{Name: t.Name, Datatype: datatypeName(t.Type), Shape: t.Shape}
	}
	return out
}

func (s *Server) modelMetadata(w http.ResponseWriter, r *http.Request) {
	m, v, err := s.lookup(r.PathValue("model"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": m.name, "versions": m.versionNames(), "platform": Platform,
		"inputs": metadataTensors(v.inputs), "outputs": metadataTensors(v.outputs)})
}

// modelReady answers 200 for a loaded model, 503 while the models load or
// while no engine of the version is up, and 404 for a model or version
// the repository does not have.
func (s *Server) modelReady(w http.ResponseWriter, r *http.Request) {
	m, v, err := s.lookup(r.PathValue("model"), r.PathValue("version"))
	if err == nil && len(v.live()) == 0 {
		err = ErrNotReady
	}
	if errors.Is(err, ErrNotReady) {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"name": r.PathValue("model"), "ready": false})
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": m.name, "ready": true})
}

func (s *Server) handleInfer(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	m, v, err := s.lookup(r.PathValue("model"), r.PathValue("version"))
	if err != nil {
		writeError(w, err)
		return
	}
	// The deadline covers reading the body too, so that a slow client
	// cannot hold a request open longer than a slow engine could.
	ctx, cancel := context.WithDeadline(r.Context(), start.Add(s.cfg.Timeout))
	defer cancel()
	_ = http.NewResponseController(w).SetReadDeadline(start.Add(s.cfg.Timeout))
	resp, err := s.inferHTTP(ctx, r, m, v)
	if err != nil {
		writeError(w, err)
	} else {
		resp.write(w)
	}
	s.record(ctx, "http", m, v, start, err)
}

// record logs a failed infer request and counts every one, under the HTTP
// status of its error whichever protocol it came by, so that one metric
// holds both.
func (s *Server) record(ctx context.Context, protocol string, m *model, v *version, start time.Time, err error) {
	code := http.StatusOK
	if err != nil {
		code = statusOf(err)
		// The client's mistakes are its own to read in the answer; the
		// server's are the operator's.
		level := slog.LevelDebug
		if code >= http.StatusInternalServerError {
			level = slog.LevelWarn
		}
		s.log.Log(ctx, level, "infer failed", "protocol", protocol, "model", m.name, "version", v.name, "status", code, "err", err)
	}
	s.cfg.Metrics.answered(m.name, v.name, protocol, code, time.Since(start))
}

// inferHTTP reads, runs and answers one infer request.
func (s *Server) inferHTTP(ctx context.Context, r *http.Request, m *model, v *version) (*inferResponse, error) {
	headerLen := int64(-1)
	if h := r.Header.Get(headerLength); h != "" {
		n, err := strconv.ParseInt(h, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%w: %s %q is not a length", ErrBadRequest, headerLength, h)
		}
		headerLen = n
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, r.ContentLength, s.cfg.MaxBodyBytes)
	}
	body, err := readBody(r, s.cfg.MaxBodyBytes)
	if mbe := (*http.MaxBytesError)(nil); errors.As(err, &mbe) {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, s.cfg.MaxBodyBytes)
	} else if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil, fmt.Errorf("%w: reading the body", ErrTimeout)
	} else if err != nil {
		return nil, fmt.Errorf("%w: reading the body: %v", ErrBadRequest, err)
	}
	req, err := parseInferRequest(body, headerLen, v.inputs, v.outputs)
	if err != nil {
		return nil, err
	}
	res, err := s.infer(ctx, m, v, req.Inputs)
	if err != nil {
		return nil, err
	}
	return newResponse(m.name, v.name, req, res.Outputs)
}

// readBody reads a request's body of at most limit bytes: into a buffer
// of its Content-Length at once when it has one (checked against limit
// already), rather than growing one as io.ReadAll does. The buffer is the
// request's own, not pooled: binary inputs become tensors on it.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(nil, r.Body, limit)
	if n := r.ContentLength; n > 0 && n <= limit {
		b := make([]byte, n)
		_, err := io.ReadFull(body, b)
		return b, err
	}
	return io.ReadAll(body)
}

// statusOf is the HTTP status of an error of a request.
func statusOf(err error) int {
	for _, c := range []struct {
		err  error
		code int
	}{
		{ErrBadRequest, http.StatusBadRequest},
		{ErrNotFound, http.StatusNotFound},
		{ErrUnauthenticated, http.StatusUnauthorized},
		{ErrPermission, http.StatusForbidden},
		{ErrConflict, http.StatusConflict},
		{ErrTooLarge, http.StatusRequestEntityTooLarge},
		{ErrQueueFull, http.StatusTooManyRequests},
		{ErrNotReady, http.StatusServiceUnavailable},
		{ErrUnavailable, http.StatusServiceUnavailable},
		{ErrTimeout, http.StatusGatewayTimeout},
		{ErrCanceled, statusClientClosed},
	} {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return http.StatusInternalServerError
}

// writeError answers with the protocol's error object.
func writeError(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrUnavailable) {
		w.Header().Set("Retry-After", "1") // another engine, or this one reopened
	}
	writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
