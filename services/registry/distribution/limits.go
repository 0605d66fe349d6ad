package distribution

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/fpga-faas/faas/services/registry/meta"
)

// retryAfter is what a 429 answer asks clients to wait: long enough for an
// upload body of another request to make progress.
const retryAfter = 10 * time.Second

func tooManyRequests(c echo.Context, message string, detail any) error {
	c.Response().Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	return apiError(http.StatusTooManyRequests, codeTooManyRequests, message, detail)
}

// activeUploads is this process's view of the uploads receiving bodies:
// how many requests of each account are sending one (limited to max per
// account; max <= 0: no limit), which uploads they write to, so that a
// second request for the same upload is refused rather than interleaved
// and sweeps leave them alone, and which bodies it has recorded in the
// database (meta.ReserveUploadBody), whose leases it renews. The count is
// a fast path only: the limit across replicas is the database's.
type activeUploads struct {
	max int

	mu       sync.Mutex
	inFlight map[string]int  // account → requests
	writing  map[string]bool // upload ids
	bodies   map[string]bool // ids of recorded bodies
}

func newActiveUploads(max int) *activeUploads {
	return &activeUploads{max: max, inFlight: map[string]int{}, writing: map[string]bool{}, bodies: map[string]bool{}}
}

// addBody and removeBody keep the set of recorded bodies.
func (a *activeUploads) addBody(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.bodies[id] = true
}

func (a *activeUploads) removeBody(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.bodies, id)
}

// bodyIDs returns the recorded bodies.
func (a *activeUploads) bodyIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Keys(a.bodies))
}

// ids returns the uploads being written.
func (a *activeUploads) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Collect(maps.Keys(a.writing))
}

// writes reports whether upload id is being written.
func (a *activeUploads) writes(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.writing[id]
}

// enter registers a request of account that will send a body, or reports
// false when the account has max such requests already.
func (a *activeUploads) enter(account string) (leave func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.max > 0 && a.inFlight[account] >= a.max {
		return nil, false
	}
	a.inFlight[account]++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.inFlight[account]--; a.inFlight[account] == 0 {
			delete(a.inFlight, account)
		}
	}, true
}

// claim marks upload id as being written, or reports false when another
// request of this process writes to it.
func (a *activeUploads) claim(id string) (release func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.writing[id] {
		return nil, false
	}
	a.writing[id] = true
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.writing, id)
	}, true
}

// errStagingFull: a body would take an account's staged bytes past
// Config.MaxStagedBytes.
var errStagingFull = errors.New("distribution: staged bytes limit reached")

// Reservations of bodies without a declared length grow by their size so
// far, within these bounds: few database writes for a large body, little
// room held back from the account's other bodies for a small one.
const (
	minBodyStep = 8 << 20
	maxBodyStep = 256 << 20
)

// inFlight is an upload body being received, recorded in the database so
// that every replica counts it against its account's limits: one body of
// Config.MaxConcurrentUploads, and the bytes reserved for it toward
// Config.MaxStagedBytes. A body of declared length reserves it all at
// admission; one without reserves in steps as it arrives (grow). Nothing
// is written to the database per chunk read.
type inFlight struct {
	s        *server
	ctx      context.Context // of the request
	rec      meta.UploadBody
	limited  bool  // MaxStagedBytes applies
	reserved int64 // bytes reserved for the body
	n        int64 // received
}

// admitBody records the body of the request as in flight for account, or
// answers 429 when the account sends as many bodies as it may, across
// replicas, or has no room for it among its staged bytes. It returns nil
// when there is nothing to count: no body (a PUT that only commits), or
// no limit.
func (s *server) admitBody(c echo.Context, account string) (*inFlight, error) {
	cl := c.Request().ContentLength
	if cl == 0 || (s.cfg.MaxConcurrentUploads <= 0 && s.cfg.MaxStagedBytes <= 0) {
		return nil, nil
	}
	id, err := randomID()
	if err != nil {
		return nil, err
	}
	b := &inFlight{s: s, ctx: c.Request().Context(), limited: s.cfg.MaxStagedBytes > 0,
		rec: meta.UploadBody{ID: id, Replica: s.replica, Account: account}}
	want, atLeast := cl, cl
	switch {
	case !b.limited:
		want, atLeast = 0, 0
	case cl < 0:
		want, atLeast = minBodyStep, 1
	}
	if err := b.reserve(want, atLeast); err != nil {
		return nil, s.bodyLimitError(c, err)
	}
	s.active.addBody(id)
	return b, nil
}

// reserve asks the database for want bytes (at least atLeast) for the body.
func (b *inFlight) reserve(want, atLeast int64) error {
	s := b.s
	lim := meta.BodyLimits{MaxBodies: s.cfg.MaxConcurrentUploads, MaxStaged: s.cfg.MaxStagedBytes}
	granted, err := s.cfg.Meta.ReserveUploadBody(b.ctx, b.rec, want, atLeast, lim, s.cfg.UploadBodyLease)
	if err != nil {
		return err
	}
	b.reserved = granted
	return nil
}

// bodyLimitError answers the refusals of meta.ReserveUploadBody.
func (s *server) bodyLimitError(c echo.Context, err error) error {
	switch {
	case errors.Is(err, meta.ErrTooManyBodies):
		return tooManyRequests(c, "too many uploads in progress for this account", s.cfg.MaxConcurrentUploads)
	case errors.Is(err, meta.ErrStagingFull):
		return stagingFull(c, s.cfg.MaxStagedBytes)
	}
	return err
}

// end stops counting the body: its bytes are recorded, or the request
// failed. Call it after recording. A failure to delete the record is left
// to its lease, which this process stops renewing now.
func (b *inFlight) end() {
	if b == nil {
		return
	}
	b.s.active.removeBody(b.rec.ID)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(b.ctx), recordTimeout)
	defer cancel()
	_ = b.s.cfg.Meta.EndUploadBody(ctx, b.rec.ID)
}

func (b *inFlight) reader(r io.Reader) io.Reader {
	if b == nil || !b.limited {
		return r
	}
	return inFlightReader{b, r}
}

type inFlightReader struct {
	b *inFlight
	r io.Reader
}

// Read passes the body on as long as it fits its reservation, growing
// the reservation when it does not; what goes past the room the account
// has is cut, keeping what fit.
func (br inFlightReader) Read(p []byte) (int, error) {
	b := br.b
	n, err := br.r.Read(p)
	if n <= 0 {
		return n, err
	}
	if need := b.n + int64(n); need > b.reserved {
		step := min(max(b.reserved, minBodyStep), maxBodyStep)
		gerr := b.reserve(max(need, b.reserved+step), b.reserved+1)
		if gerr != nil || need > b.reserved {
			// Keep only what fits: the upload stays within the limit.
			keep := max(b.reserved-b.n, 0)
			b.n += keep
			if gerr == nil || errors.Is(gerr, meta.ErrStagingFull) {
				gerr = fmt.Errorf("%w: %d bytes", errStagingFull, b.s.cfg.MaxStagedBytes)
			}
			return int(keep), gerr
		}
	}
	b.n += int64(n)
	return n, err
}

// RenewUploadLeases keeps the leases of the upload bodies this process
// receives (see Config.UploadBodyLease) until ctx ends, renewing them all
// in one statement every third of the lease. Run it on every process
// serving the API for as long as it serves: without it, bodies that take
// longer than the lease stop counting against their account's limits on
// other replicas. A failed renewal is logged (Config.Logger) and retried
// at the next tick; a body whose lease passed meanwhile (the database was
// out of reach for a whole lease) no longer counts on other processes
// until it grows its reservation or ends: renewing does not admit it
// again.
func (h *Handler) RenewUploadLeases(ctx context.Context) {
	s := h.s
	t := time.NewTicker(max(s.cfg.UploadBodyLease/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := s.cfg.Meta.RenewUploadBodies(ctx, s.active.bodyIDs(), s.cfg.UploadBodyLease)
		if err != nil && ctx.Err() == nil && s.cfg.Logger != nil {
			s.cfg.Logger.WarnContext(ctx, "renewing the leases of upload bodies failed", slog.Any("err", err))
		}
	}
}

// replicaName names this process in the records of its bodies: the host
// name, for whoever looks at them, and a random part, as host names repeat
// across restarts.
func replicaName() (string, error) {
	id, err := randomID()
	if err != nil {
		return "", err
	}
	host, _ := os.Hostname() // only informative
	return host + "/" + id[:12], nil
}

// randomID returns 16 random bytes in hex.
func randomID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("distribution: random id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

func stagingFull(c echo.Context, max int64) error {
	return tooManyRequests(c, fmt.Sprintf("the account's open uploads hold as many bytes as they may (%d); finish or cancel some", max), nil)
}
