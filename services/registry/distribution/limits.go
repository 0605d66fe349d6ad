package distribution

import (
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
// account; max <= 0: no limit), and which uploads they write to, so that
// a second request for the same upload is refused rather than interleaved.
type activeUploads struct {
	max int

	mu       sync.Mutex
	inFlight map[string]int    // account → requests
	writing  map[string]string // upload id → account
}

func newActiveUploads(max int) *activeUploads {
	return &activeUploads{max: max, inFlight: map[string]int{}, writing: map[string]string{}}
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

// claim marks upload id as being written by a request of account, or
// reports false when another request of this process writes to it.
func (a *activeUploads) claim(id, account string) (release func(), ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, busy := a.writing[id]; busy {
		return nil, false
	}
	a.writing[id] = account
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.writing, id)
	}, true
}
