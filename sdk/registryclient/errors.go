package registryclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// Error categories: every *Error is one (errors.Is), by its status.
var (
	// ErrUnavailable: the registry could not be reached, or failed (5xx),
	// or asked to be called later (429).
	ErrUnavailable = errors.New("registry unavailable")
	// ErrUnauthenticated: the registry refused the credentials (401).
	ErrUnauthenticated = errors.New("registry refused the credentials")
	// ErrDenied: the registry refused the request for this caller (403).
	ErrDenied = errors.New("registry denied the request")
	// ErrNodeUntrusted: the registry does not trust this node (yet): an
	// operator has not approved it, or revoked it. It is also ErrDenied.
	ErrNodeUntrusted = errors.New("the registry does not trust this node")
	// ErrNotFound: the registry does not know the object (404).
	ErrNotFound = errors.New("not found in the registry")
	// ErrConflict: the object's state forbids the request (409).
	ErrConflict = errors.New("registry conflict")
	// ErrGone: the object ended (410): a detached attachment.
	ErrGone = errors.New("gone from the registry")
	// ErrSpendLimit: the tenant's spend this month has reached its hard
	// limit (402, registryapi.CodeSpendLimit): no new loads or attachments
	// until the limit is raised or the month ends.
	ErrSpendLimit = errors.New("spend limit reached")
	// ErrInvalid: the registry refused the request's content (400, 413,
	// 422); Error.Field names the field when it can.
	ErrInvalid = errors.New("invalid request")
)

// Error is a failed call: no answer (Status 0, Err says why), or an
// answer other than a success, with the error envelope's code and message.
type Error struct {
	Method, Path string // the request; Path without its query
	Status       int    // HTTP status; 0 when no answer came
	Code         string // the envelope's code (registryapi.Code*); "" if none
	Message      string // for people: the registry's message, or what failed
	Field        string // the refused field, for CodeInvalid
	RetryAfter   time.Duration
	Err          error // the cause when no answer, or a malformed one, came
}

func (e *Error) Error() string {
	s := "registry: " + e.Method + " " + e.Path + ": "
	if e.Status != 0 {
		s += strconv.Itoa(e.Status) + " "
	}
	s += e.Message
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether e is of category target.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrUnavailable:
		return Temporary(e)
	case ErrUnauthenticated:
		return e.Status == http.StatusUnauthorized
	case ErrDenied:
		return e.Status == http.StatusForbidden
	case ErrNodeUntrusted:
		return e.Status == http.StatusForbidden && e.Code == registryapi.CodeNodeUntrusted
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrConflict:
		return e.Status == http.StatusConflict
	case ErrGone:
		return e.Status == http.StatusGone
	case ErrSpendLimit:
		return e.Status == http.StatusPaymentRequired
	case ErrInvalid:
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge || e.Status == http.StatusUnprocessableEntity
	}
	return false
}

// Temporary reports whether a request that failed with err may succeed
// when sent again unchanged: the registry could not be reached or gave no
// answer in time, or it answered 408, 429 or 5xx (a 503 whose database is
// out of disk space, read-only or unreachable, say). A refusal of the
// request itself (other 4xx) is not temporary.
func Temporary(err error) bool {
	var e *Error
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return false
	case errors.As(err, &e):
		if e.Status == 0 || e.Status < 300 {
			return e.Status == 0 // unreachable; a malformed success is not
		}
		return e.Status == http.StatusRequestTimeout || e.Status == http.StatusTooManyRequests || e.Status >= 500
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// CheckError returns nil for a successful answer (2xx), and otherwise an
// *Error read from its envelope, for callers that read answers
// themselves (streams, downloads).
func CheckError(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	e := &Error{Status: resp.StatusCode}
	if resp.Request != nil {
		e.Method, e.Path = resp.Request.Method, resp.Request.URL.Path
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env registryapi.ErrorBody
	if json.Unmarshal(data, &env) == nil && env.Error.Message != "" {
		e.Code, e.Message, e.Field = env.Error.Code, env.Error.Message, env.Error.Field
	} else {
		e.Message = http.StatusText(resp.StatusCode)
		if e.Message == "" {
			e.Message = fmt.Sprintf("status %d", resp.StatusCode)
		}
	}
	return e
}
