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

// slowBodyReader fails a body that delivers fewer than rate bytes per
// second over a window of time spent waiting for it, so that a client
// trickling its body cannot keep a request, and what it holds, for as long
// as it likes. Only time spent in Read counts: while the registry is busy
// elsewhere (writing a part to S3, say) the client cannot send. A Read
// that waits on the client is interrupted by a timer through interrupt
// (which sets the connection's read deadline to now): it would not return
// otherwise.
type slowBodyReader struct {
	r         io.Reader
	rate      float64 // bytes per second
	window    time.Duration
	interrupt func()
	cut       atomic.Bool

	mu        sync.Mutex // guards the fields below against the timer
	got       int64      // bytes read in the current window
	waited    time.Duration
	inRead    bool
	readStart time.Time // of the Read in progress, or of the window if later
	stopped   bool
	timer     *time.Timer
}

func newSlowBodyReader(r io.Reader, rate int64, window time.Duration, interrupt func()) *slowBodyReader {
	b := &slowBodyReader{r: r, rate: float64(rate), window: window, interrupt: interrupt}
	// Under the lock: on a loaded machine the timer can fire before the
	// assignment, and check reads b.timer.
	b.mu.Lock()
	b.timer = time.AfterFunc(b.tick(), b.check)
	b.mu.Unlock()
	return b
}

// tick is how often the timer looks.
func (b *slowBodyReader) tick() time.Duration { return max(b.window/4, time.Millisecond) }

// check ends a window once enough time was spent waiting for the body.
func (b *slowBodyReader) check() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.stopped {
		return
	}
	now := time.Now()
	waited := b.waited
	if b.inRead {
		waited += now.Sub(b.readStart)
	}
	if waited >= b.window {
		if float64(b.got) < b.rate*waited.Seconds() {
			b.cut.Store(true)
			b.interrupt()
			return
		}
		b.got, b.waited, b.readStart = 0, 0, now
	}
	b.timer.Reset(b.tick())
}

func (b *slowBodyReader) Read(p []byte) (int, error) {
	if b.cut.Load() {
		return 0, b.err()
	}
	b.mu.Lock()
	b.inRead, b.readStart = true, time.Now()
	b.mu.Unlock()
	n, err := b.r.Read(p)
	b.mu.Lock()
	b.inRead = false
	b.waited += time.Since(b.readStart)
	b.got += int64(n)
	b.mu.Unlock()
	if err != nil && err != io.EOF && b.cut.Load() {
		err = b.err() // the read was interrupted
	}
	return n, err
}

func (b *slowBodyReader) err() error {
	return fmt.Errorf("%w: fewer than %.0f bytes per second over %v", errBodyTooSlow, b.rate, b.window)
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
