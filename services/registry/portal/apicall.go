package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// API is what the portal needs of the marketplace API: to serve a request
// as an account it has signed in itself (api.API.ServeAs).
type API interface {
	ServeAs(w http.ResponseWriter, r *http.Request, acct *auth.Account)
}

// maxAPIResponse bounds what one in-process API call may return.
const maxAPIResponse = 8 << 20

// apiError is an /api/v1 error answer: its message is written for users.
type apiError struct {
	Status  int
	Code    string
	Message string
	Field   string
	// RetryAfter is the API's Retry-After header, passed on to the browser.
	RetryAfter string
}

func (e *apiError) Error() string { return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code) }

// recorder is a minimal in-memory http.ResponseWriter holding at most max
// bytes of body.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
	max    int
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
		return 0, fmt.Errorf("portal: in-process response over %d bytes", r.max)
	}
	return r.body.Write(p)
}

// call runs method path (under /api/v1, query included) on the API as acct
// (nil: anonymous), with in as the JSON body when not nil, and decodes the
// answer into out when not nil. API refusals are *apiError.
func (p *Portal) call(ctx context.Context, acct *auth.Account, method, path string, query url.Values, in, out any) error {
	var body io.Reader = http.NoBody
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("portal: encode %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	u := registryapi.Prefix + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	r, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return fmt.Errorf("portal: %s %s: %w", method, path, err)
	}
	if in != nil {
		r.Header.Set("Content-Type", "application/json")
	}
	w := newRecorder(maxAPIResponse)
	p.cfg.API.ServeAs(w, r, acct)
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.status >= 300 {
		var env struct {
			Error struct{ Code, Message, Field string } `json:"error"`
		}
		if json.Unmarshal(w.body.Bytes(), &env) != nil || env.Error.Code == "" {
			return &apiError{Status: w.status, Code: "error", Message: http.StatusText(w.status), RetryAfter: w.h.Get("Retry-After")}
		}
		return &apiError{Status: w.status, Code: env.Error.Code, Message: env.Error.Message, Field: env.Error.Field,
			RetryAfter: w.h.Get("Retry-After")}
	}
	if out == nil || w.status == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(w.body.Bytes(), out); err != nil {
		return fmt.Errorf("portal: decode %s %s: %w", method, path, err)
	}
	return nil
}
