package blobtest

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// Fault is what a Proxy does to an answer once its byte budget is spent.
type Fault int

const (
	// Cut closes the connection, as a crashed service would.
	Cut Fault = iota + 1
	// Stall stops forwarding and keeps the connection open, as a hung
	// service would.
	Stall
)

// Proxy is a TCP proxy in front of a storage service (MinIO), for tests of
// how a store copes with faults of the service's answers. Requests pass
// untouched; answers (service to store) pass until an injected fault.
type Proxy struct {
	ln      net.Listener
	backend string
	done    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	fault  Fault
	budget int64 // bytes of answers forwarded before fault
}

// NewProxy listens on a loopback port and forwards every connection to
// backend (host:port) until the test ends.
func NewProxy(t testing.TB, backend string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{ln: ln, backend: backend, done: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Inject makes the proxy apply f once it has forwarded after more bytes of
// answers, counted over all connections.
func (p *Proxy) Inject(f Fault, after int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.budget = f, after
}

// Heal ends the fault: later answers pass whole (stalled connections stay
// stalled).
func (p *Proxy) Heal() { p.Inject(0, 0) }

// Drop closes every open connection, as a service closing idle
// keep-alive connections (or restarting) would.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) close() {
	close(p.done)
	p.ln.Close()
	p.Drop()
	p.wg.Wait()
}

func (p *Proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *Proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		delete(p.conns, c)
		c.Close()
	}
}

// take returns how many of n bytes of an answer may pass, and the fault to
// apply after them (0: none).
func (p *Proxy) take(n int) (int, Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fault == 0 {
		return n, 0
	}
	if int64(n) < p.budget {
		p.budget -= int64(n)
		return n, 0
	}
	k := int(p.budget)
	p.budget = 0
	return k, p.fault
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.backend)
		if err != nil {
			c.Close()
			continue
		}
		if !p.track(c, b) {
			c.Close()
			b.Close()
			return
		}
		p.wg.Add(2)
		go func() {
			defer p.wg.Done()
			_, _ = io.Copy(b, c)
			p.untrack(c, b)
		}()
		go func() {
			defer p.wg.Done()
			p.answer(c, b)
			p.untrack(c, b)
		}()
	}
}

// answer forwards b's bytes to c until the fault.
func (p *Proxy) answer(c, b net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := b.Read(buf)
		k, f := p.take(n)
		if _, werr := c.Write(buf[:k]); werr != nil {
			return
		}
		switch f {
		case Cut:
			return
		case Stall:
			<-p.done
			return
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}
