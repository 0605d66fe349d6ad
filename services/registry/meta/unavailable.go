package meta

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrUnavailable: the database cannot serve the request for now (out of
// disk space or another resource, read-only, or unreachable). It is a
// fault of the service, not of the request: the same request may succeed
// once the operator has fixed the database. Every error wrapping it also
// wraps one of the causes below, whose text users may read.
var ErrUnavailable = errors.New("database unavailable")

// The causes of ErrUnavailable. Their text is written for users: it names
// the fault without host names, SQL or other internals, so that the HTTP
// edges can show it as is.
var (
	ErrDiskFull       = fmt.Errorf("%w: the database is out of disk space", ErrUnavailable)
	ErrOutOfMemory    = fmt.Errorf("%w: the database is out of memory", ErrUnavailable)
	ErrTooManyClients = fmt.Errorf("%w: the database has too many connections", ErrUnavailable)
	ErrOutOfResources = fmt.Errorf("%w: the database is out of resources", ErrUnavailable)
	ErrReadOnly       = fmt.Errorf("%w: the database is read-only", ErrUnavailable)
	ErrUnreachable    = fmt.Errorf("%w: the database is unreachable", ErrUnavailable)
	unavailableCauses = []error{ErrDiskFull, ErrOutOfMemory, ErrTooManyClients, ErrOutOfResources, ErrReadOnly, ErrUnreachable}
	unavailablePrefix = ErrUnavailable.Error() + ": "
)

// RetryAfter is how long a client should wait before it retries a request
// that failed with ErrUnavailable. The HTTP edges send it as Retry-After:
// short, because most faults (a restart, a failover) pass within seconds,
// and a retry costs one cheap refusal while the fault lasts.
const RetryAfter = 5 * time.Second

// Unavailable classifies err, an error of the database driver (pgx) or one
// wrapping it: when it says that the database cannot serve requests for
// now, Unavailable returns it wrapped with ErrUnavailable and its cause
// (ErrDiskFull, ErrReadOnly, ErrUnreachable, …); any other error, nil
// included, is returned unchanged. It is the one place that knows which
// PostgreSQL conditions are faults of the service: the packages that own
// tables wrap their errors with it, and the HTTP edges pass what reaches
// them through it too, so that no path answers a fault as a 500.
//
// Only errors the driver produced are classified: a network error of
// another client (the S3 blob store, say) passes unchanged, and so does a
// caller that went away (context.Canceled).
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	if cause := classify(err); cause != nil {
		return fmt.Errorf("%w: %w", cause, err)
	}
	return err
}

// Cause returns the text of the cause of an error wrapping ErrUnavailable,
// such as "the database is out of disk space", for users; ok is false for
// other errors.
func Cause(err error) (cause string, ok bool) {
	if !errors.Is(err, ErrUnavailable) {
		return "", false
	}
	for _, c := range unavailableCauses {
		if errors.Is(err, c) {
			return strings.TrimPrefix(c.Error(), unavailablePrefix), true
		}
	}
	return strings.TrimPrefix(ErrUnreachable.Error(), unavailablePrefix), true
}

// UnavailableMessage is what the HTTP edges answer for a fault with the
// given cause (see Cause): what is wrong, and that retrying is the remedy,
// in the same words on every surface.
func UnavailableMessage(cause string) string {
	return "the registry cannot answer for now: " + cause + "; try again in a few seconds"
}

func classify(err error) error {
	if errors.Is(err, context.Canceled) {
		return nil // the caller went away; the database may be fine
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return ErrDiskFull
		case pe.Code == "53200": // out_of_memory
			return ErrOutOfMemory
		case pe.Code == "53300": // too_many_connections
			return ErrTooManyClients
		case strings.HasPrefix(pe.Code, "53"): // insufficient_resources and the rest of class 53
			return ErrOutOfResources
		case pe.Code == "25006": // read_only_sql_transaction: also what a hot standby answers to a write
			return ErrReadOnly
		case pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
			return ErrUnreachable
		case strings.HasPrefix(pe.Code, "08"): // connection_exception
			return ErrUnreachable
		case strings.HasPrefix(pe.Code, "58"): // system_error: an I/O error of the server
			if strings.Contains(strings.ToLower(pe.Message), "no space left") {
				return ErrDiskFull
			}
		}
		return nil
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return ErrUnreachable
	}
	// pgconn marks its own network and timeout errors (a connection reset
	// or closed by a server that stopped, no answer before the deadline)
	// with SafeToRetry; no other error a store returns has that method.
	var retry interface{ SafeToRetry() bool }
	if errors.As(err, &retry) {
		return ErrUnreachable
	}
	return nil
}
