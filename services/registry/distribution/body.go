package distribution

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// errBodyTooSlow: a request body arrived slower than Config.MinBodyRate.
var errBodyTooSlow = errors.New("distribution: request body too slow")

// slowBodyReader fails a body that delivers fewer than min bytes in any
// window (counted from the first read), so that a client trickling its
// body cannot keep a request, and what it holds, for as long as it likes.
// A read that waits on the client is interrupted by a timer through
// interrupt (which sets the connection's read deadline to now): it would
// not return otherwise.
type slowBodyReader struct {
	r         io.Reader
	min       int64 // bytes per window
	window    time.Duration
	interrupt func()
	n         atomic.Int64 // bytes read
	cut       atomic.Bool

	mu      sync.Mutex // guards the fields below against the timer
	last    int64      // n at the start of the current window
	stopped bool
	timer   *time.Timer
}

func newSlowBodyReader(r io.Reader, rate int64, window time.Duration, interrupt func()) *slowBodyReader {
	b := &slowBodyReader{r: r, min: int64(float64(rate) * window.Seconds()), window: window, interrupt: interrupt}
	b.timer = time.AfterFunc(window, b.check)
	return b
}

// check ends a window.
func (b *slowBodyReader) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	n := b.n.Load()
	if n-b.last < b.min {
		b.cut.Store(true)
		b.interrupt()
		return
	}
	b.last = n
	b.timer.Reset(b.window)
}

func (b *slowBodyReader) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, b.err()
	}
	n, err := b.r.Read(p)
	b.n.Add(int64(n))
	if err != nil && err != io.EOF && b.cut.Load() {
		err = b.err() // the read was interrupted
	}
	return n, err
}

func (b *slowBodyReader) err() error {
	return fmt.Errorf("%w: fewer than %d bytes in %v", errBodyTooSlow, b.min, b.window)
}

// stop ends the watch; after it returns, interrupt is not called.
func (b *slowBodyReader) stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = true
	b.timer.Stop()
}

// body returns the request body, capped by MaxChunkBytes and cut when
// slower than MinBodyRate; call stop once done reading it.
func (s *server) body(c echo.Context, limit int64) (r io.Reader, stop func()) {
	r = c.Request().Body
	if limit > 0 {
		r = http.MaxBytesReader(c.Response(), c.Request().Body, limit)
	}
	if s.cfg.MinBodyRate <= 0 {
		return r, func() {}
	}
	rc := http.NewResponseController(c.Response())
	sb := newSlowBodyReader(r, s.cfg.MinBodyRate, s.cfg.MinBodyRateWindow, func() {
		// Not every ResponseWriter supports it; the server's ReadTimeout
		// still bounds the request then.
		_ = rc.SetReadDeadline(time.Now())
	})
	return sb, sb.stop
}

// bodyError maps a failure to read a request body; code is the error code
// of a body cut for being too slow.
func bodyError(err error, code string) error {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return apiError(http.StatusRequestEntityTooLarge, codeSizeInvalid,
			fmt.Sprintf("body larger than %d bytes", tooBig.Limit), nil)
	case errors.Is(err, errBodyTooSlow):
		return apiError(http.StatusRequestTimeout, code, "request body too slow", err.Error())
	}
	return err
}
