package regclient_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/fpga-faas/faas/services/agent/regclient"
)

// TestTemporary: what the usage queue sends again and what it drops.
func TestTemporary(t *testing.T) {
	status := func(cat error, code int) error {
		return fmt.Errorf("%w: POST /api/v1/usage: %w", cat, &regclient.StatusError{Status: code, Message: "m"})
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{status(regclient.ErrUnavailable, 503), true},
		{status(regclient.ErrUnavailable, 500), true},
		{status(regclient.ErrUnavailable, 429), true},
		{status(regclient.ErrUnavailable, 408), true},
		{status(regclient.ErrUnavailable, 422), false}, // a refusal, though the category says unavailable
		{status(regclient.ErrUnavailable, 400), false},
		{status(regclient.ErrDenied, 403), false},
		{status(regclient.ErrUnauthenticated, 401), false},
		{fmt.Errorf("%w: POST /api/v1/usage: connection refused", regclient.ErrUnavailable), true},
		{context.DeadlineExceeded, true},
		{context.Canceled, false},
		{errors.New("other"), false},
	} {
		if got := regclient.Temporary(c.err); got != c.want {
			t.Errorf("Temporary(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
