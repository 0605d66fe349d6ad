package server

// The agent's errors on the wire: every answer that fails carries an
// agentapi.Error (sdk/agentapi), whatever produced it, so that clients
// branch on its code and show its hint. (A session's errors travel as
// OpError frames instead: connLoop.writeErrorFrame.)

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/services/agent/loader"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// apiError carries a wire error through Go error returns, so that code
// far from the handler decides the code and hint the caller sees.
type apiError struct{ e agentapi.Error }

func (a *apiError) Error() string { return a.e.Message }

// agentErr makes an apiError: the one way to fail with a chosen code.
func agentErr(code agentapi.Code, msg, hint string) error {
	return &apiError{agentapi.Error{Code: code, Message: msg, Hint: hint}}
}

// writeWireError answers with e under status: for the handlers that know
// both, including the few whose status is not statusOf(e.Code).
func writeWireError(w http.ResponseWriter, status int, e agentapi.Error) {
	writeJSON(w, status, agentapi.ErrorBody{Error: e})
}

// writeErrorFor answers with a Go error: the wire form an agentErr carries,
// else fallback's code and hint around err's message, so that a plain
// error never reaches the caller without a code.
func writeErrorFor(w http.ResponseWriter, err error, fallback agentapi.Code, hint string) {
	var ae *apiError
	if errors.As(err, &ae) {
		writeWireError(w, statusOf(ae.e.Code), ae.e)
		return
	}
	writeWireError(w, statusOf(fallback), agentapi.Error{Code: fallback, Message: err.Error(), Hint: hint})
}

// badRequest answers 400 with a formatted message: the most common
// failure, a request that does not parse.
func badRequest(w http.ResponseWriter, format string, args ...any) {
	writeWireError(w, http.StatusBadRequest, agentapi.Error{Code: agentapi.CodeBadRequest, Message: fmt.Sprintf(format, args...)})
}

// loaderWireError is the wire form of a load's failure: the Load keeps it
// (its events, GET /v1/loads/{id}) long after the handler has answered,
// and the pool reports its message to the registry.
func loaderWireError(err error) *agentapi.Error {
	var le *loader.Error
	if errors.As(err, &le) {
		return &agentapi.Error{Code: le.Code, Message: le.Error(), Hint: le.Hint}
	}
	return &agentapi.Error{Code: agentapi.CodeInternal, Message: err.Error()}
}

// statusOf is the HTTP status of each code, so that clients that read
// only the status still tell the failures apart.
func statusOf(c agentapi.Code) int {
	switch c {
	case agentapi.CodeBadRequest:
		return http.StatusBadRequest
	case agentapi.CodeUnauthenticated:
		return http.StatusUnauthorized
	case agentapi.CodePermission, agentapi.CodeNotEntitled:
		return http.StatusForbidden
	case agentapi.CodeNotFound:
		return http.StatusNotFound
	case agentapi.CodeSpendLimit:
		return http.StatusPaymentRequired
	case agentapi.CodeBusy, agentapi.CodeQuota:
		return http.StatusConflict
	case agentapi.CodeSignature, agentapi.CodeCountersign, agentapi.CodeIncompatible:
		return http.StatusUnprocessableEntity
	case agentapi.CodeCacheFull:
		return http.StatusInsufficientStorage
	case agentapi.CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// sessionCode classifies a sessions error for the wire: the same codes
// answer a session's open (HTTP) and its requests (OpError frames).
func sessionCode(err error) agentapi.Code {
	switch {
	case errors.Is(err, sessions.ErrBadHandle):
		return agentapi.CodeBadHandle
	case errors.Is(err, sessions.ErrQuota):
		return agentapi.CodeQuota
	case errors.Is(err, sessions.ErrOutOfRange):
		return agentapi.CodeOutOfRange
	case errors.Is(err, sessions.ErrRefused):
		return agentapi.CodeRefused
	case errors.Is(err, sessions.ErrInUse):
		return agentapi.CodeInUse
	case errors.Is(err, sessions.ErrClosed):
		return agentapi.CodeSessionClosed
	case errors.Is(err, sessions.ErrTimeout):
		return agentapi.CodeJobTimeout
	case errors.Is(err, sessions.ErrCanceled), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return agentapi.CodeCanceled
	case errors.Is(err, session.ErrFrame):
		return agentapi.CodeBadRequest
	}
	return agentapi.CodeInternal
}
