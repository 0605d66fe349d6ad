package modelserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// Defaults of Config's zero values.
const (
	DefaultName         = "faas-modelserver"
	DefaultMaxBodyBytes = 64 << 20
	DefaultQueueSize    = 64
	DefaultTimeout      = 30 * time.Second
	DefaultPipeline     = 2
)

// The errors requests fail with, which the HTTP surface turns into status
// codes (see the package comment).
var (
	ErrBadRequest = errors.New("bad request")       // 400
	ErrNotFound   = errors.New("not found")         // 404
	ErrTooLarge   = errors.New("request too large") // 413
	ErrQueueFull  = errors.New("queue full")        // 429
	ErrNotReady   = errors.New("not ready")         // 503
	ErrTimeout    = errors.New("request timed out") // 504
	// ErrCanceled: the client went away. Its status, 499 (nginx's "client
	// closed request"), reaches only logs and metrics.
	ErrCanceled   = errors.New("request canceled by the client")
	ErrRepository = errors.New("bad model repository") // Load's errors
)

// Config configures a Server. Engines, and Repository or Models, are
// required.
type Config struct {
	// Repository is the model repository's folder ("": none).
	Repository string
	// Models are models from the registry by the name they are served
	// under: references REGISTRY/NS/REPO@sha256:… or :TAG (resolved once
	// at load and pinned), fetched through Cache (registrysource.go).
	Models map[string]string
	// Cache fetches and keeps registry models; required with Models, and
	// for the repository extension's loads from the registry.
	Cache *ModelCache
	// Auth, if not nil, requires a credential of every request but the
	// health checks, on both transports (auth.go).
	Auth *Auth
	// Engines are the AliDNN engines models run on: slots opened through
	// faasd (alidnn.Agent) or in-process simulators (alidnn.NewLocal).
	// Every version of every model gets one instance, a Session, on each.
	// The caller owns them and closes them after Server.Close.
	Engines []alidnn.Engine
	// Openers open more engines, which the server owns: opened at Load,
	// reopened when they fail, closed by Close (see engines.go).
	Openers []EngineOpener
	// ReopenAttempts bounds the attempts in a row to reopen a failed
	// engine; past them the server gives up: it is no longer live and
	// Dead is closed, for its supervisor to restart it (0: no bound).
	ReopenAttempts int
	// Name and Version are the server metadata's (default DefaultName and
	// "dev").
	Name, Version string
	// MaxBodyBytes bounds an infer request's body; larger ones are refused
	// with 413 (default DefaultMaxBodyBytes).
	MaxBodyBytes int64
	// QueueSize is a model's max_queue_size when its config has none
	// (default DefaultQueueSize).
	QueueSize int
	// Timeout bounds an infer request from its arrival, queueing included;
	// past it the request fails with 504 (default DefaultTimeout).
	Timeout time.Duration
	// Pipeline is each instance's alidnn.WithPipeline: jobs of one
	// instance on its engine at once (default DefaultPipeline).
	Pipeline int
	// Logger gets the loads and failed requests (default: discarded).
	Logger *slog.Logger
	// Metrics, if not nil, counts requests (NewMetrics).
	Metrics *Metrics
}

// Server serves the models of a repository. Its zero value is not usable:
// make one with New.
type Server struct {
	cfg Config
	log *slog.Logger

	ready  atomic.Bool
	mu     sync.Mutex
	models map[string]*model      // set by Load, changed by the repository extension
	states map[string]modelStatus // models not READY, for the repository index (repoext.go)
	eng    *engines
}

// model is one model of the repository, all its versions.
type model struct {
	name     string
	source   string     // the folder, or the registry reference pinned to its digest
	versions []*version // increasing; the last is the default
	queue    chan struct{}
	gate     gate // requests in flight, drained by an unload (repoext.go)
}

// version is one version of a model, with an instance on every engine.
type version struct {
	name    string // the folder's name
	inputs  []tensorSpec
	outputs []tensorSpec
	prog    *alidnn.Program        // what an engine opened again loads
	batch   int                    // its alidnn.WithBatch
	opts    []alidnn.SessionOption // its dynamic batching (ModelConfig.sessionOptions)

	mu        sync.RWMutex
	instances []*instance // on the engines that are up: live, add, remove
}

type instance struct {
	s       *alidnn.Session
	eng     *engine
	gen     uint64       // the generation of eng that s is on
	pending atomic.Int64 // requests given to s and not yet answered
}

// New checks cfg and returns a Server that answers health and metadata
// requests at once and is ready once Load has loaded every model.
func New(cfg Config) (*Server, error) {
	if (cfg.Repository == "" && len(cfg.Models) == 0) || len(cfg.Engines)+len(cfg.Openers) == 0 {
		return nil, errors.New("modelserver: a repository or registry models, and at least one engine, are required")
	}
	if len(cfg.Models) > 0 && cfg.Cache == nil {
		return nil, errors.New("modelserver: registry models need a model cache")
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = DefaultQueueSize
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Pipeline <= 0 {
		cfg.Pipeline = DefaultPipeline
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: log, eng: newEngines(cfg)}, nil
}

// Load compiles or reads every model version of the repository and of
// Config.Models and opens its instances. The server is ready when it
// returns nil; on an error nothing stays open, and the server is never
// ready. A server loads once; later the repository extension loads and
// unloads single models.
func (s *Server) Load(ctx context.Context) error {
	s.mu.Lock()
	loaded := s.models != nil
	s.mu.Unlock()
	if loaded {
		return errors.New("modelserver: the models are loaded already")
	}
	var dirs []string
	if s.cfg.Repository != "" {
		var err error
		if dirs, err = modelDirs(s.cfg.Repository); err != nil && (len(s.cfg.Models) == 0 || !errors.Is(err, errNoModels)) {
			return err
		}
	}
	if err := s.openAll(ctx); err != nil {
		return err
	}
	models := map[string]*model{}
	for _, dir := range dirs {
		m, err := s.loadModel(ctx, dir)
		if err != nil {
			closeModels(ctx, models)
			s.closeEngines()
			return fmt.Errorf("model %s: %w", filepath.Base(dir), err)
		}
		models[m.name] = m
	}
	if err := s.loadRegistryModels(ctx, models); err != nil {
		closeModels(ctx, models)
		s.closeEngines()
		return err
	}
	s.mu.Lock()
	s.models = models
	s.mu.Unlock()
	s.watchAll()
	s.ready.Store(true)
	return nil
}

func (s *Server) loadModel(ctx context.Context, dir string) (*model, error) {
	c, err := readConfig(dir)
	if err != nil {
		return nil, err
	}
	vs, err := versionDirs(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(vs))
	for k, v := range vs {
		names[k] = strconv.FormatInt(v, 10)
	}
	return s.openModel(ctx, c, dir, dir, names)
}

// openModel opens the versions of the model c configures: each is the
// folder of its name under dir. source is what the index shows.
func (s *Server) openModel(ctx context.Context, c *ModelConfig, source, dir string, versions []string) (*model, error) {
	queue := c.MaxQueueSize
	if queue == 0 {
		queue = s.cfg.QueueSize
	}
	m := &model{name: c.Name, source: source, queue: make(chan struct{}, queue)}
	for _, name := range versions {
		start := time.Now()
		ver, err := s.loadVersion(ctx, filepath.Join(dir, name), c)
		if err != nil {
			closeModel(ctx, m)
			return nil, fmt.Errorf("version %s: %w", name, err)
		}
		ver.name = name
		m.versions = append(m.versions, ver)
		s.log.Info("model loaded", "model", m.name, "version", name, "instances", len(ver.instances), "took", time.Since(start))
	}
	return m, nil
}

func (s *Server) loadVersion(ctx context.Context, vdir string, c *ModelConfig) (*version, error) {
	p, err := readProgram(vdir, c)
	if err != nil {
		return nil, err
	}
	v := &version{prog: p, batch: max(c.MaxBatchSize, 1), opts: c.sessionOptions()}
	if d := c.DynamicBatching; d != nil {
		perJob := v.batch // the most requests a job takes, as alidnn.Session counts them
		if p.Batch > 1 {
			perJob = p.Batch
		}
		if slices.Max(append([]int{1}, d.PreferredBatchSize...)) > perJob {
			return nil, fmt.Errorf("%w: dynamic_batching: preferred_batch_size %v: a job runs at most %d requests", ErrRepository, d.PreferredBatchSize, perJob)
		}
	}
	if v.inputs, err = specs(p.Inputs, p.Batch); err != nil {
		return nil, err
	}
	if v.outputs, err = specs(p.Outputs, p.Batch); err != nil {
		return nil, err
	}
	for _, e := range s.eng.all {
		eng, gen := e.current()
		in, err := s.openInstance(ctx, e, eng, gen, v)
		if err != nil {
			v.close(ctx)
			return nil, fmt.Errorf("opening an instance on engine %d: %w", e.id, err)
		}
		v.instances = append(v.instances, in)
	}
	return v, nil
}

// Ready reports whether every model is loaded and every version has an
// instance on an engine that is up.
func (s *Server) Ready() bool { return s.ready.Load() && s.allServed() }

// Close stops the server's instances: waiting requests fail, running jobs
// end first. The engines of Config.Engines stay open; those the openers
// opened are closed.
func (s *Server) Close(ctx context.Context) {
	s.ready.Store(false)
	s.eng.stop()
	s.eng.wg.Wait()
	s.mu.Lock()
	models := s.models
	s.models = nil
	s.mu.Unlock()
	closeModels(ctx, models)
	s.closeEngines()
}

func closeModels(ctx context.Context, models map[string]*model) {
	for _, m := range models {
		closeModel(ctx, m)
	}
}

func closeModel(ctx context.Context, m *model) {
	for _, v := range m.versions {
		v.close(ctx)
	}
}

func (v *version) close(ctx context.Context) {
	for _, in := range v.live() {
		_ = in.s.Close(ctx)
	}
}

// lookup finds a model's version: the latest if ver is "".
func (s *Server) lookup(name, ver string) (*model, *version, error) {
	if !s.ready.Load() {
		return nil, nil, fmt.Errorf("%w: the models are loading", ErrNotReady)
	}
	s.mu.Lock()
	m := s.models[name]
	s.mu.Unlock()
	if m == nil {
		return nil, nil, fmt.Errorf("%w: no model %q", ErrNotFound, name)
	}
	if ver == "" {
		return m, m.versions[len(m.versions)-1], nil
	}
	for _, v := range m.versions {
		if v.name == ver {
			return m, v, nil
		}
	}
	return nil, nil, fmt.Errorf("%w: model %q has no version %q", ErrNotFound, name, ver)
}

// versionNames are the names of m's versions, in increasing order.
func (m *model) versionNames() []string {
	names := make([]string, len(m.versions))
	for k, v := range m.versions {
		names[k] = v.name
	}
	return names
}

// infer runs one request on the version's least busy instance, once the
// model's queue admits it.
func (s *Server) infer(ctx context.Context, m *model, v *version, inputs []*onnx.Tensor) (*alidnn.Result, error) {
	if !m.gate.enter() {
		return nil, fmt.Errorf("%w: model %q was unloaded", ErrNotFound, m.name)
	}
	defer m.gate.leave()
	select {
	case m.queue <- struct{}{}:
		defer func() { <-m.queue }()
	default:
		return nil, fmt.Errorf("%w: model %q has %d requests in flight", ErrQueueFull, m.name, cap(m.queue))
	}
	admitted := time.Now()
	s.cfg.Metrics.admitted(m.name, 1)
	defer s.cfg.Metrics.admitted(m.name, -1)
	live := v.live()
	if len(live) == 0 {
		return nil, fmt.Errorf("%w: no engine of model %q is up; it is being opened again", ErrUnavailable, m.name)
	}
	in := live[0]
	for _, c := range live[1:] {
		if c.pending.Load() < in.pending.Load() {
			in = c
		}
	}
	in.pending.Add(1)
	defer in.pending.Add(-1)
	res, err := in.s.Run(ctx, inputs...)
	switch {
	case err == nil:
		s.cfg.Metrics.ran(m.name, v.name, admitted, time.Now(), res)
		return res, nil
	case errors.Is(err, context.Canceled):
		return nil, fmt.Errorf("%w: %v", ErrCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("%w after %v", ErrTimeout, s.cfg.Timeout)
	case errors.Is(err, alidnn.ErrInput):
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	case errors.Is(err, alidnn.ErrClosed) && s.ready.Load():
		// The instance was dropped under the request: its engine failed.
		return nil, fmt.Errorf("%w: engine %d failed: %v", ErrUnavailable, in.eng.id, err)
	case errors.Is(err, alidnn.ErrClosed):
		return nil, fmt.Errorf("%w: %v", ErrNotReady, err)
	case engineLost(in, err):
		return nil, fmt.Errorf("%w: engine %d failed: %v", ErrUnavailable, in.eng.id, err)
	}
	return nil, err
}
