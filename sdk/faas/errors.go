package faas

import (
	"context"
	"errors"
	"fmt"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// Sentinels for errors.Is. An *Error matches the sentinel of its code; a
// transport failure matches ErrUnavailable.
var (
	ErrNotFound     = errors.New("not found")                                        // not_found
	ErrPermission   = errors.New("not authenticated or permission denied")           // unauthenticated, permission_denied
	ErrNotEntitled  = errors.New("not entitled to the image")                        // not_entitled
	ErrSpendLimit   = errors.New("spend limit reached")                              // spend_limit: no new loads or attachments this month
	ErrSignature    = errors.New("signature or countersignature invalid or missing") // signature_invalid, countersignature_missing
	ErrIncompatible = errors.New("image incompatible with the slot")                 // incompatible
	ErrBusy         = errors.New("slot busy")                                        // slot_busy
	ErrCacheFull    = errors.New("node cache full")                                  // cache_full
	ErrUnavailable  = errors.New("unavailable")                                      // registry_unavailable, faasd unreachable
	ErrProgram      = errors.New("programming or self-test failed")                  // program_failed, selftest_failed

	// Errors of sessions (Device, Buffer, Queue, Job).
	ErrBadHandle  = errors.New("no such buffer or program in this session") // bad_handle
	ErrQuota      = errors.New("device memory quota exceeded")              // quota_exceeded
	ErrOutOfRange = errors.New("access outside the buffer")                 // out_of_range
	ErrRefused    = errors.New("program refused")                           // program_refused
	ErrInUse      = errors.New("buffer in use by a program")                // in_use
	ErrClosed     = errors.New("session closed")                            // session_closed; also use after Close or Free
	ErrJobTimeout = errors.New("job time limit exceeded")                   // job_timeout: faasd aborted a job that ran too long

	// Errors of the accelerator pool (Attach).
	ErrAttachFailed = errors.New("attach failed")         // the node could not load the attachment's image
	ErrLeaseLost    = errors.New("attachment lease lost") // the lease expired, the node was lost, or the attachment was detached
	ErrNoCapacity   = errors.New("no room in the pool")   // no node has a free chip (or window) for the image now
)

// Error is a request faasd refused or a load that failed. (The agent's
// agentapi.Error is flattened into Code, Message and Hint: a struct cannot
// both embed a field named Error and have an Error method.)
type Error struct {
	Status  int           // HTTP status; 0 for a failed load or pull
	Code    agentapi.Code // stable, for programs
	Message string        // for people
	Hint    string        // what to do about it, may be empty
	LoadID  string        // the failed load or pull, if any
}

// Error returns the message alone; the hint is in Hint (and Hint(err)), so
// that wrapped errors stay on one line.
func (e *Error) Error() string {
	if e.Message != "" {
		return e.Message
	}
	if e.Code != "" {
		return string(e.Code)
	}
	return fmt.Sprintf("faasd answered status %d", e.Status)
}

// API returns the error as the wire type.
func (e *Error) API() agentapi.Error {
	return agentapi.Error{Code: e.Code, Message: e.Message, Hint: e.Hint}
}

// Is maps the error's code to the package's sentinels.
func (e *Error) Is(target error) bool {
	switch e.Code {
	case agentapi.CodeNotFound:
		return target == ErrNotFound
	case agentapi.CodeUnauthenticated, agentapi.CodePermission:
		return target == ErrPermission
	case agentapi.CodeNotEntitled:
		return target == ErrNotEntitled
	case agentapi.CodeSpendLimit:
		return target == ErrSpendLimit
	case agentapi.CodeSignature, agentapi.CodeCountersign:
		return target == ErrSignature
	case agentapi.CodeIncompatible:
		return target == ErrIncompatible
	case agentapi.CodeBusy:
		return target == ErrBusy
	case agentapi.CodeCacheFull:
		return target == ErrCacheFull
	case agentapi.CodeUnavailable:
		return target == ErrUnavailable
	case agentapi.CodeProgram, agentapi.CodeSelfTest:
		return target == ErrProgram
	case agentapi.CodeBadHandle:
		return target == ErrBadHandle
	case agentapi.CodeQuota:
		return target == ErrQuota
	case agentapi.CodeOutOfRange:
		return target == ErrOutOfRange
	case agentapi.CodeRefused:
		return target == ErrRefused
	case agentapi.CodeInUse:
		return target == ErrInUse
	case agentapi.CodeSessionClosed:
		return target == ErrClosed
	case agentapi.CodeCanceled:
		return target == context.Canceled
	case agentapi.CodeJobTimeout:
		return target == ErrJobTimeout
	}
	return false
}

// Hint returns what to do about err: the hint of an *Error in its chain, or
// of a transport failure, or "".
func Hint(err error) string {
	var h interface{ hint() string }
	if errors.As(err, &h) {
		return h.hint()
	}
	return ""
}

func (e *Error) hint() string { return e.Hint }

// transportError is a failure to reach faasd or to read its answer.
type transportError struct {
	msg string
	err error
	hnt string
}

func (e *transportError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *transportError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.err}
}

func (e *transportError) hint() string { return e.hnt }

// loadError is the error of a finished load that failed.
func loadError(l agentapi.Load) error {
	if l.State != agentapi.LoadFailed {
		return nil
	}
	e := &Error{Code: agentapi.CodeInternal, Message: fmt.Sprintf("%s %s failed", l.Kind, l.ID), LoadID: l.ID}
	if l.Error != nil {
		e.Code, e.Message, e.Hint = l.Error.Code, l.Error.Message, l.Error.Hint
		if e.Code == "" {
			e.Code = agentapi.CodeInternal
		}
	}
	return e
}
