package distribution

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
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
// account; max <= 0: no limit) and how many bytes they received so far,
// and which uploads they write to, so that a second request for the same
// upload is refused rather than interleaved, and sweeps leave them alone.
type activeUploads struct {
	max int

	mu       sync.Mutex
	inFlight map[string]int   // account → requests
	received map[string]int64 // account → bytes received by them, not yet recorded
	writing  map[string]bool  // upload ids
}

func newActiveUploads(max int) *activeUploads {
	return &activeUploads{max: max, inFlight: map[string]int{}, received: map[string]int64{}, writing: map[string]bool{}}
}

// receive adds n bytes received for account and returns the account's
// total of bytes received by requests in flight.
func (a *activeUploads) receive(account string, n int64) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.received[account] += n
	total := a.received[account]
	if total == 0 {
		delete(a.received, account)
	}
	return total
}

// ids returns the uploads being written.
func (a *activeUploads) ids() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.writing))
	for id := range a.writing {
		ids = append(ids, id)
	}
	return ids
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

// quota counts the bytes of one upload body of an account as received
// (until release), failing the body once the account's recorded staged
// bytes (staged, read when the request began) and those received by its
// requests in flight exceed max.
type quota struct {
	a       *activeUploads
	account string
	staged  int64
	max     int64
	n       int64 // received by this body
}

func (q *quota) reader(r io.Reader) io.Reader { return quotaReader{q, r} }

// release stops counting the body's bytes as in flight: they are
// recorded, or the request failed.
func (q *quota) release() { q.a.receive(q.account, -q.n) }

type quotaReader struct {
	q *quota
	r io.Reader
}

func (qr quotaReader) Read(p []byte) (int, error) {
	q := qr.q
	n, err := qr.r.Read(p)
	if n <= 0 {
		return n, err
	}
	total := q.staged + q.a.receive(q.account, int64(n))
	if over := total - q.max; over > 0 {
		// Keep only what fits: the upload stays within the limit.
		keep := max(int64(n)-over, 0)
		q.a.receive(q.account, keep-int64(n))
		q.n += keep
		return int(keep), fmt.Errorf("%w: %d bytes", errStagingFull, q.max)
	}
	q.n += int64(n)
	return n, err
}

// uploadQuota is what a request that sends an upload body of account asks
// first: whether the account may stage more. It returns the quota to count
// the body against (nil: no limit).
func (s *server) uploadQuota(c echo.Context, account string) (*quota, error) {
	if s.cfg.MaxStagedBytes <= 0 || c.Request().ContentLength == 0 {
		return nil, nil // no limit, or no body (a PUT that only commits)
	}
	usage, err := s.cfg.Meta.AccountUploads(c.Request().Context(), account)
	if err != nil {
		return nil, err
	}
	room := s.cfg.MaxStagedBytes - usage.Staged - s.active.receive(account, 0)
	if cl := c.Request().ContentLength; room <= 0 || cl > room {
		return nil, stagingFull(c, s.cfg.MaxStagedBytes)
	}
	return &quota{a: s.active, account: account, staged: usage.Staged, max: s.cfg.MaxStagedBytes}, nil
}

func stagingFull(c echo.Context, max int64) error {
	return tooManyRequests(c, fmt.Sprintf("the account's open uploads hold as many bytes as they may (%d); finish or cancel some", max), nil)
}
