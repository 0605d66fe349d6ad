package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fpga-faas/faas/sdk/agentapi"
	client "github.com/fpga-faas/faas/sdk/faas"
)

// Marks of errors that carry no class of their own.
var (
	errOp    = errors.New("operation failed") // exit 1
	errUsage = errors.New("usage")            // exit 2
)

// marked is err classified by mark, with err's message.
type marked struct{ err, mark error }

func (m *marked) Error() string   { return m.err.Error() }
func (m *marked) Unwrap() []error { return []error{m.err, m.mark} }

// failed marks err as a failed operation (exit 1) unless it has a class.
func failed(err error) error {
	if err == nil {
		return nil
	}
	return &marked{err, errOp}
}

func failedf(format string, args ...any) error { return failed(fmt.Errorf(format, args...)) }

// usageErrorf is a usage error or bad input (exit 2).
func usageErrorf(format string, args ...any) error {
	return &marked{fmt.Errorf(format, args...), errUsage}
}

// exitWith exits with code: a child's exit code, passed through.
type exitWith struct {
	code int
	err  error
}

func (e *exitWith) Error() string { return e.err.Error() }

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var fe *client.Error
	var ew *exitWith
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ew):
		return ew.code
	case errors.Is(err, errFailed):
		return 1
	case errors.Is(err, errUsage):
		return 2
	case errors.Is(err, client.ErrLeaseLost):
		return 9
	case errors.Is(err, client.ErrNoCapacity):
		return 6
	case errors.Is(err, client.ErrAttachFailed):
		return 1
	case errors.Is(err, client.ErrPermission), errors.Is(err, client.ErrNotEntitled), errors.Is(err, client.ErrSpendLimit):
		return 3
	case errors.Is(err, client.ErrSignature):
		return 4
	case errors.Is(err, client.ErrIncompatible):
		return 5
	case errors.Is(err, client.ErrBusy):
		return 6
	case errors.Is(err, client.ErrUnavailable):
		return 7
	case errors.Is(err, client.ErrCacheFull):
		return 8
	case errors.Is(err, client.ErrProgram):
		return 1
	case errors.Is(err, client.ErrNotFound):
		return 2
	case errors.As(err, &fe):
		if fe.Code == agentapi.CodeBadRequest {
			return 2
		}
		return 1
	case errors.Is(err, errOp), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return 1
	}
	return 2
}

// report prints err as "faas: message", then "hint: …" when there is a
// hint, and returns the exit code. Failed tests were reported already.
func report(w io.Writer, err error) int {
	if err != nil && !errors.Is(err, errFailed) {
		fmt.Fprintln(w, "faas:", err)
		if h := client.Hint(err); h != "" {
			fmt.Fprintln(w, "hint:", h)
		}
	}
	return exitCode(err)
}
