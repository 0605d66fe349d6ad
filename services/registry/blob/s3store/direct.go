package s3store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// Defaults of the Options of direct GETs.
const (
	DefaultMaxDirectConns    = 64
	DefaultDirectReadTimeout = time.Minute
	// directIdleTimeout is how long an idle connection is kept: below
	// MinIO's and S3's own keep-alive timeouts, so that a reused connection
	// is rarely one the server is closing.
	directIdleTimeout = 15 * time.Second
	// directChunk is how much a body moves per deadline: a stalled
	// transfer fails once no chunk arrives within the read timeout.
	directChunk = 1 << 20
	// directErrBody bounds what is read of an error answer.
	directErrBody = 4 << 10
)

// errDirectProtocol: a response a direct GET cannot use (the store then
// falls back to minio-go, which reports the service's error properly).
var errDirectProtocol = errors.New("s3store: direct get: unusable response")

// direct issues GETs of presigned object URLs over plain-HTTP/1.1
// connections it owns, so that a body can hand its *net.TCPConn to the
// writer (see directBody.WriteTo) and Linux splices the bytes from the S3
// socket to the client's. minio-go keeps its connections to itself.
type direct struct {
	dialer      net.Dialer
	readTimeout time.Duration
	conns       chan struct{} // one token per open connection

	mu   sync.Mutex
	idle []*directConn // most recently used last
}

// directConn is a connection to addr with its response reader, which is
// empty between responses.
type directConn struct {
	addr  string
	c     *net.TCPConn
	br    *bufio.Reader
	since time.Time // idle since
}

func newDirect(maxConns int, readTimeout time.Duration) *direct {
	return &direct{
		dialer:      net.Dialer{Timeout: readTimeout, KeepAlive: 30 * time.Second},
		readTimeout: readTimeout,
		conns:       make(chan struct{}, maxConns),
	}
}

// directUsable reports whether GETs of endpoint may bypass minio-go: plain
// HTTP (a TLS connection cannot be spliced) and no proxy set in the
// environment for it.
func directUsable(endpoint *url.URL) bool {
	if endpoint == nil || endpoint.Scheme != "http" {
		return false
	}
	p, err := http.ProxyFromEnvironment(&http.Request{URL: endpoint})
	return err == nil && p == nil
}

// get GETs u (a presigned URL), with a Range header of rng unless it is
// "", and returns the response and a body of its Content-Length bytes. It
// returns an error wrapping errDirectProtocol, or the dial or I/O error,
// when the answer is not a 200 or 206 of known length; the caller then
// tries minio-go. With all connections in use it fails at once, with
// errDirectBusy.
func (p *direct) get(ctx context.Context, u *url.URL, rng string) (*http.Response, *directBody, error) {
	select {
	case p.conns <- struct{}{}:
	default:
		return nil, nil, errDirectBusy
	}
	addr := hostPort(u)
	dc := p.idleConn(addr)
	if dc != nil {
		resp, b, err := p.roundTrip(ctx, dc, u, rng)
		if err == nil {
			return resp, b, nil
		}
		// Most likely the service closed the idle connection: retry on
		// a new one, as net/http does.
		dc.c.Close()
		if ctx.Err() != nil || errors.Is(err, errDirectProtocol) {
			<-p.conns
			return nil, nil, err
		}
	}
	dc, err := p.dial(ctx, addr)
	if err != nil {
		<-p.conns
		return nil, nil, err
	}
	resp, b, err := p.roundTrip(ctx, dc, u, rng)
	if err != nil {
		dc.c.Close()
		<-p.conns
		return nil, nil, err
	}
	return resp, b, nil
}

var errDirectBusy = errors.New("s3store: direct get: all connections in use")

func (p *direct) roundTrip(ctx context.Context, dc *directConn, u *url.URL, rng string) (*http.Response, *directBody, error) {
	req := &http.Request{Method: http.MethodGet, URL: u, Host: u.Host, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"User-Agent": {"faas-registry"}}}
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	b := &directBody{p: p, dc: dc}
	// Cancelling ctx fails the connection's pending and later I/O.
	b.stop = context.AfterFunc(ctx, b.cancel)
	fail := func(err error) (*http.Response, *directBody, error) {
		b.stop()
		return nil, nil, err
	}
	if err := b.deadline(); err != nil {
		return fail(err)
	}
	if err := req.Write(dc.c); err != nil {
		return fail(fmt.Errorf("s3store: direct get: %w", err))
	}
	resp, err := http.ReadResponse(dc.br, req)
	if err != nil {
		return fail(fmt.Errorf("s3store: direct get: %w", err))
	}
	want := http.StatusOK
	if rng != "" {
		want = http.StatusPartialContent
	}
	if resp.StatusCode != want || resp.ContentLength < 0 || len(resp.TransferEncoding) > 0 {
		// Read a little of the answer for the error; S3's are short XML.
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, directErrBody))
		return fail(fmt.Errorf("%w: %s (Content-Length %d): %.200q", errDirectProtocol, resp.Status, resp.ContentLength, msg))
	}
	// The body is read from the connection directly, not through
	// resp.Body: first what the response reader holds already.
	buffered := dc.br.Buffered()
	if int64(buffered) > resp.ContentLength {
		return fail(fmt.Errorf("%w: %d bytes after a body of %d", errDirectProtocol, int64(buffered)-resp.ContentLength, resp.ContentLength))
	}
	// The slice stays valid: nothing reads into the reader until the
	// connection's next response.
	b.head, _ = dc.br.Peek(buffered)
	_, _ = dc.br.Discard(buffered)
	b.rest = resp.ContentLength - int64(buffered)
	b.reuse = !resp.Close
	resp.Body = nil
	return resp, b, nil
}

// hostPort is u's host with the port of its scheme when it names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// idleConn returns the most recently used idle connection to addr, or
// nil. Connections idle too long are closed on the way.
func (p *direct) idleConn(addr string) *directConn {
	now := time.Now()
	var dc *directConn
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.idle) - 1; i >= 0; i-- {
		c := p.idle[i]
		if now.Sub(c.since) > directIdleTimeout {
			// The older ones are too; drop them all.
			for _, old := range p.idle[:i+1] {
				old.c.Close()
			}
			p.idle = append(p.idle[:0], p.idle[i+1:]...)
			break
		}
		if dc == nil && c.addr == addr {
			dc = c
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
		}
	}
	clear(p.idle[len(p.idle):cap(p.idle)])
	return dc
}

// dial opens a new connection to addr.
func (p *direct) dial(ctx context.Context, addr string) (*directConn, error) {
	c, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("s3store: direct get: %w", err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("%w: %T is no TCP connection", errDirectProtocol, c)
	}
	return &directConn{addr: addr, c: tc, br: bufio.NewReaderSize(tc, 4<<10)}, nil
}

// put keeps dc for reuse, or closes it when enough are idle.
func (p *direct) put(dc *directConn) {
	p.mu.Lock()
	dc.since = time.Now() // under the lock: idle stays in this order
	if len(p.idle) < cap(p.conns) {
		p.idle = append(p.idle, dc)
		dc = nil
	}
	p.mu.Unlock()
	if dc != nil {
		dc.c.Close()
	}
}

// close closes the idle connections.
func (p *direct) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.c.Close()
	}
}

// directBody is the body of a direct GET: head (what the response reader
// had buffered), then rest bytes of the connection. Reading it all returns
// the connection for reuse; closing it early, an error, or the request's
// context ending closes the connection, so a client of the registry sees
// a truncated body, never a wrong one.
type directBody struct {
	p     *direct
	dc    *directConn
	head  []byte
	rest  int64
	reuse bool
	err   error // sticky
	stop  func() bool

	mu        sync.Mutex // orders cancel against deadline
	cancelled bool
	closed    bool
}

// cancel fails the connection's I/O at once (context.AfterFunc).
func (b *directBody) cancel() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cancelled = true
	_ = b.dc.c.SetDeadline(time.Unix(1, 0))
}

// deadline gives the next read (or the request's write and response head)
// the read timeout.
func (b *directBody) deadline() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cancelled {
		return fmt.Errorf("s3store: direct get: %w", context.Canceled)
	}
	return b.dc.c.SetDeadline(time.Now().Add(b.p.readTimeout))
}

// fail records err, the body's first error, and returns it.
func (b *directBody) fail(err error) error {
	if b.err == nil {
		b.mu.Lock()
		cancelled := b.cancelled
		b.mu.Unlock()
		if cancelled {
			err = fmt.Errorf("%w (%w)", context.Canceled, err)
		}
		b.err = fmt.Errorf("s3store: direct get: %w", err)
	}
	return b.err
}

// Read implements io.Reader.
func (b *directBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.rest == 0 {
		return 0, io.EOF
	}
	if err := b.deadline(); err != nil {
		return 0, b.fail(err)
	}
	n, err := b.dc.c.Read(p[:min(int64(len(p)), b.rest)])
	b.rest -= int64(n)
	if err == io.EOF && b.rest > 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		return n, b.fail(err)
	}
	return n, nil
}

// WriteTo implements io.WriterTo: when w is an io.ReaderFrom (a
// *net.TCPConn, or an http.ResponseWriter serving one), it gets the S3
// connection itself, in chunks, so that the kernel moves the bytes.
func (b *directBody) WriteTo(w io.Writer) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	rf, ok := w.(io.ReaderFrom)
	if !ok {
		return io.Copy(w, struct{ io.Reader }{b})
	}
	var total int64
	if len(b.head) > 0 {
		n, err := w.Write(b.head)
		total += int64(n)
		b.head = b.head[n:]
		if err != nil {
			return total, b.fail(err)
		}
	}
	for b.rest > 0 {
		if err := b.deadline(); err != nil {
			return total, b.fail(err)
		}
		chunk := min(b.rest, directChunk)
		lr := &io.LimitedReader{R: b.dc.c, N: chunk}
		n, err := rf.ReadFrom(lr)
		total += n
		b.rest -= n
		if err == nil && n < chunk {
			err = io.ErrUnexpectedEOF // the S3 side closed early
		}
		if err != nil {
			return total, b.fail(err)
		}
	}
	return total, nil
}

// Close implements io.Closer: a body read to its end leaves its
// connection for reuse.
func (b *directBody) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	live := b.stop() // false: the context ended, the deadline is spent
	if live && b.reuse && b.err == nil && len(b.head) == 0 && b.rest == 0 && b.dc.br.Buffered() == 0 &&
		b.dc.c.SetDeadline(time.Time{}) == nil {
		b.dc.br.Reset(b.dc.c)
		b.p.put(b.dc)
	} else {
		b.dc.c.Close()
	}
	<-b.p.conns
	return nil
}

// limitBody is a directBody of which only n bytes are wanted: its
// connection is not reused.
func limitBody(b *directBody, n int64) *directBody {
	if extra := int64(len(b.head)) + b.rest - n; extra > 0 {
		b.reuse = false
		if int64(len(b.head)) > n {
			b.head, b.rest = b.head[:n], 0
		} else {
			b.rest -= extra
		}
	}
	return b
}

// contentRange formats the Content-Range a 206 answer to a Range of n
// bytes at offset must carry, up to the size.
func contentRange(offset, n int64) string {
	return "bytes " + strconv.FormatInt(offset, 10) + "-" + strconv.FormatInt(offset+n-1, 10) + "/"
}
