package modelserver

// Engines that fail and come back: a faasd slot whose faasd stops, a pool
// attachment whose node is lost. The server drops such an engine's
// instances, so that requests go to the engines left (or fail with 503
// when none is), and opens the engine again with backoff, loading every
// model version on it before it takes requests.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/faas"
)

// ErrUnavailable: the engine a request ran on failed under it, or no
// engine of its model is up. Over REST it is 503 with Retry-After, over
// gRPC Unavailable: both tell a client to try again.
var ErrUnavailable = errors.New("engine unavailable")

// Bounds of reopening a failed engine: the wait between attempts doubles
// from reopenMin to reopenMax, and each attempt (an attach waits for its
// node to load the image) gives up after openTimeout.
const (
	reopenMin   = 250 * time.Millisecond
	reopenMax   = 10 * time.Second
	openTimeout = 2 * time.Minute
	// closeTimeout bounds closing a failed engine's sessions; a session
	// on an engine that hangs is abandoned.
	closeTimeout = 10 * time.Second
)

// An EngineOpener opens one engine of the server, and opens it again when
// it fails: a faasd slot (FaasdSlot) or a pool attachment
// (PoolAttachment). Its String names it in logs.
type EngineOpener interface {
	OpenEngine(ctx context.Context) (*OpenedEngine, error)
	String() string
}

// OpenedEngine is an engine an EngineOpener opened, which the server owns
// until it calls Close.
type OpenedEngine struct {
	Engine alidnn.Engine
	// Done, if not nil, is closed when the engine has failed on its own:
	// the session ended, the attachment was lost. Failures are also
	// learnt from the errors of requests.
	Done <-chan struct{}
	// Where says where the engine is, for logs ("node a slot 2").
	Where string
	// Close releases the engine; the server calls it once.
	Close func()
}

// engine is one engine of the server: fixed (Config.Engines) or opened,
// and reopened, by an EngineOpener.
type engine struct {
	id     int
	opener EngineOpener // nil: fixed, never reopened

	mu     sync.Mutex
	cur    alidnn.Engine // nil while down
	opened *OpenedEngine // nil for a fixed engine or while down
	gen    uint64        // bumped on every failure: stale reports are ignored
	failed chan struct{} // closed by fail, for the current generation
	cause  error
}

// engines are the server's engines and what watches them.
type engines struct {
	all  []*engine
	stop context.CancelFunc
	wg   sync.WaitGroup // watchers and the closing of failed engines

	deadOnce sync.Once
	dead     chan struct{} // closed when an engine could not be reopened
}

func newEngines(cfg Config) *engines {
	es := &engines{stop: func() {}, dead: make(chan struct{})}
	for _, e := range cfg.Engines {
		es.all = append(es.all, &engine{id: len(es.all), cur: e, failed: make(chan struct{})})
	}
	for _, o := range cfg.Openers {
		es.all = append(es.all, &engine{id: len(es.all), opener: o, failed: make(chan struct{})})
	}
	return es
}

// current is the engine as it is now: nil while down.
func (e *engine) current() (alidnn.Engine, uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur, e.gen
}

// fail reports that generation gen of e failed with err; the watcher
// drops it. Reports of an earlier generation are ignored.
func (e *engine) fail(gen uint64, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gen != gen || e.cur == nil || e.opener == nil || e.cause != nil {
		return
	}
	e.cause = err
	close(e.failed)
}

// openAll opens the engines of the openers, all at once: attachments wait
// for their nodes. On an error none stays open.
func (s *Server) openAll(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make([]error, len(s.eng.all))
	for k, e := range s.eng.all {
		if e.opener == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			octx, cancel := context.WithTimeout(ctx, openTimeout)
			defer cancel()
			o, err := e.opener.OpenEngine(octx)
			if err != nil {
				errs[k] = fmt.Errorf("engine %d (%s): %w", e.id, e.opener, err)
				return
			}
			e.mu.Lock()
			e.cur, e.opened = o.Engine, o
			e.mu.Unlock()
			s.cfg.Metrics.engineUp(1)
			s.log.Info("engine opened", "engine", e.id, "where", o.Where)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		s.closeEngines()
		return err
	}
	return nil
}

// watchAll starts a watcher on every engine that can be reopened.
func (s *Server) watchAll() {
	ctx, stop := context.WithCancel(context.Background())
	s.eng.stop = stop
	for _, e := range s.eng.all {
		if e.opener != nil {
			s.eng.wg.Add(1)
			go s.watch(ctx, e)
		}
	}
}

// watch waits for e to fail, drops it and opens it again, until ctx ends.
func (s *Server) watch(ctx context.Context, e *engine) {
	defer s.eng.wg.Done()
	for {
		e.mu.Lock()
		failed, gen := e.failed, e.gen
		var done <-chan struct{}
		if e.opened != nil {
			done = e.opened.Done
		}
		e.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-failed:
		case <-done:
			e.fail(gen, errors.New("the engine's session ended"))
		}
		s.drop(e)
		if !s.reopen(ctx, e) {
			return
		}
	}
}

// drop takes e's instances out of every version and closes them and the
// engine in the background: the requests running on them fail, new ones
// go to the other engines.
func (s *Server) drop(e *engine) {
	e.mu.Lock()
	cause, opened := e.cause, e.opened
	e.cur, e.opened = nil, nil
	e.gen++
	e.mu.Unlock()
	var dropped []*instance
	for _, v := range s.versions() {
		dropped = append(dropped, v.remove(e)...)
	}
	s.cfg.Metrics.engineUp(-1)
	s.log.Warn("engine failed: its instances are dropped and it is opened again", "engine", e.id, "where", opened.Where,
		"instances", len(dropped), "err", cause)
	s.eng.wg.Add(1)
	go func() {
		defer s.eng.wg.Done()
		// The engine first: closing it ends its jobs, which the
		// sessions' Close waits for.
		opened.Close()
		closeSessions(dropped)
	}()
}

// closeSessions closes instances' sessions, giving up on those that take
// longer than closeTimeout (an engine that hangs).
func closeSessions(ins []*instance) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, in := range ins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = in.s.Close(ctx)
		}()
	}
	ended := make(chan struct{})
	go func() {
		wg.Wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
	}
}

// reopen opens e again, with backoff, and loads every model version on
// it before it takes requests. It returns false if ctx ended first or it
// gave up after Config.ReopenAttempts.
func (s *Server) reopen(ctx context.Context, e *engine) bool {
	wait := reopenMin
	for attempt := 1; ; attempt++ {
		err := s.reopenOnce(ctx, e)
		if err == nil {
			s.cfg.Metrics.reopened()
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if n := s.cfg.ReopenAttempts; n > 0 && attempt >= n {
			s.log.Error("giving up on an engine: the server is no longer live", "engine", e.id, "opener", e.opener.String(), "attempts", attempt, "err", err)
			s.eng.deadOnce.Do(func() { close(s.eng.dead) })
			return false
		}
		s.log.Warn("reopening an engine failed", "engine", e.id, "opener", e.opener.String(), "attempt", attempt, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
		wait = min(2*wait, reopenMax)
	}
}

func (s *Server) reopenOnce(ctx context.Context, e *engine) error {
	octx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	o, err := e.opener.OpenEngine(octx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	gen := e.gen
	e.mu.Unlock()
	vs := s.versions()
	ins := make([]*instance, len(vs))
	for k, v := range vs {
		if ins[k], err = s.openInstance(octx, e, o.Engine, gen, v); err != nil {
			o.Close()
			closeSessions(ins[:k])
			return fmt.Errorf("loading a model on %s: %w", o.Where, err)
		}
	}
	e.mu.Lock()
	e.cur, e.opened, e.cause, e.failed = o.Engine, o, nil, make(chan struct{})
	e.mu.Unlock()
	for k, v := range vs {
		v.add(ins[k])
	}
	s.cfg.Metrics.engineUp(1)
	s.log.Info("engine opened again", "engine", e.id, "where", o.Where, "instances", len(ins))
	return nil
}

// openInstance opens v's instance on eng, generation gen of e.
func (s *Server) openInstance(ctx context.Context, e *engine, eng alidnn.Engine, gen uint64, v *version) (*instance, error) {
	sess, err := alidnn.Open(ctx, eng, v.prog, append([]alidnn.SessionOption{alidnn.WithBatch(v.batch), alidnn.WithPipeline(s.cfg.Pipeline)}, v.opts...)...)
	if err != nil {
		return nil, err
	}
	return &instance{s: sess, eng: e, gen: gen}, nil
}

// Live reports whether the server can still serve: false once it gave up
// reopening an engine (Config.ReopenAttempts).
func (s *Server) Live() bool {
	select {
	case <-s.eng.dead:
		return false
	default:
		return true
	}
}

// Dead is closed when the server gave up reopening an engine.
func (s *Server) Dead() <-chan struct{} { return s.eng.dead }

// closeEngines stops the watchers and closes the opened engines; the
// caller's (Config.Engines) stay open.
func (s *Server) closeEngines() {
	s.eng.stop()
	s.eng.wg.Wait()
	for _, e := range s.eng.all {
		e.mu.Lock()
		o := e.opened
		e.cur, e.opened = nil, nil
		e.mu.Unlock()
		if o != nil {
			o.Close()
			s.cfg.Metrics.engineUp(-1)
		}
	}
}

// versions are every version of every model.
func (s *Server) versions() []*version {
	s.mu.Lock()
	defer s.mu.Unlock()
	var vs []*version
	for _, m := range s.models {
		vs = append(vs, m.versions...)
	}
	return vs
}

// live are v's instances on engines that are up; the slice is not
// changed afterwards (add and remove copy it).
func (v *version) live() []*instance {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.instances
}

func (v *version) add(in *instance) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.instances = append(v.instances[:len(v.instances):len(v.instances)], in)
}

// remove takes e's instances out of v and returns them.
func (v *version) remove(e *engine) []*instance {
	v.mu.Lock()
	defer v.mu.Unlock()
	var keep, gone []*instance
	for _, in := range v.instances {
		if in.eng == e {
			gone = append(gone, in)
		} else {
			keep = append(keep, in)
		}
	}
	v.instances = keep
	return gone
}

// allServed reports whether every version of every model has an
// instance on an engine that is up.
func (s *Server) allServed() bool {
	for _, v := range s.versions() {
		if len(v.live()) == 0 {
			return false
		}
	}
	return true
}

// engineLost reports whether err, from a run on in, says that in's engine
// failed (the faasd session ended, the attachment was lost); if so the
// engine is reported to its watcher.
func engineLost(in *instance, err error) bool {
	if !errors.Is(err, faas.ErrUnavailable) && !errors.Is(err, faas.ErrClosed) && !errors.Is(err, faas.ErrLeaseLost) {
		return false
	}
	in.eng.fail(in.gen, err)
	return true
}
