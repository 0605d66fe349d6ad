package modelserver

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
)

// The states of the repository index, Triton's.
const (
	StateReady       = "READY"
	StateUnavailable = "UNAVAILABLE"
	StateLoading     = "LOADING"
	StateUnloading   = "UNLOADING"
)

// ErrConflict: a load or unload of a model another one is under way for.
var ErrConflict = errors.New("conflict") // 409

// maxRepoBodyBytes bounds a load or index request's body: a few fields.
const maxRepoBodyBytes = 64 << 10

// modelStatus is a model that is not READY, for the index.
type modelStatus struct {
	state, reason string
}

// gate counts a model's requests in flight; once closed it admits none,
// and drain waits for those it admitted.
type gate struct {
	mu       sync.Mutex
	closed   bool
	inflight sync.WaitGroup
}

func (g *gate) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.inflight.Add(1)
	return true
}

func (g *gate) leave() { g.inflight.Done() }

func (g *gate) drain() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.inflight.Wait()
}

// indexEntry is one entry of POST /v2/repository/index.
type indexEntry struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
}

// repositoryRoutes adds the repository extension to mux. Loads and
// unloads wait for Load: until it returns, the models are its to set.
func (s *Server) repositoryRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v2/repository/index", s.repositoryIndex)
	mux.HandleFunc("POST /v2/repository/models/{model}/load", s.whenReady(s.repositoryLoad))
	mux.HandleFunc("POST /v2/repository/models/{model}/unload", s.whenReady(s.repositoryUnload))
}

func (s *Server) whenReady(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.Ready() {
			writeError(w, fmt.Errorf("%w: the models are loading", ErrNotReady))
			return
		}
		h(w, r)
	}
}

// readRepoBody decodes a repository request's optional JSON body into v.
func readRepoBody(r *http.Request, v any) error {
	b, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxRepoBodyBytes))
	if err != nil {
		return fmt.Errorf("%w: reading the body (at most %d bytes): %v", ErrBadRequest, maxRepoBodyBytes, err)
	}
	if len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%w: the body: %v", ErrBadRequest, err)
	}
	return nil
}

// repositoryIndex lists every model: each version of a loaded one READY,
// then those loading, unloading or unavailable (unloaded, failed to load,
// or a repository folder not loaded), by name. {"ready": true} lists the
// READY ones only.
func (s *Server) repositoryIndex(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Ready bool `json:"ready"`
	}
	if err := readRepoBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	var local []string
	if s.cfg.Repository != "" {
		dirs, _ := modelDirs(s.cfg.Repository)
		for _, d := range dirs {
			local = append(local, filepath.Base(d))
		}
	}
	out := []indexEntry{}
	s.mu.Lock()
	for name, m := range s.models {
		for _, v := range m.versionNames() {
			out = append(out, indexEntry{Name: name, Version: v, State: StateReady})
		}
	}
	for name, st := range s.states {
		if s.models[name] == nil && !req.Ready {
			out = append(out, indexEntry{Name: name, State: st.state, Reason: st.reason})
		}
	}
	for _, name := range local {
		if s.models[name] == nil && s.states[name].state == "" && !req.Ready {
			out = append(out, indexEntry{Name: name, State: StateUnavailable, Reason: "not loaded"})
		}
	}
	s.mu.Unlock()
	// By name; a model's versions stay in their numeric order.
	slices.SortStableFunc(out, func(a, b indexEntry) int { return cmp.Compare(a.Name, b.Name) })
	writeJSON(w, http.StatusOK, out)
}

// loadRequest is the body of a load: parameters.registry_ref loads the
// model from the registry, else it comes from Config.Models or the
// repository folder of its name.
type loadRequest struct {
	Parameters struct {
		RegistryRef string `json:"registry_ref"`
	} `json:"parameters"`
}

// repositoryLoad loads a model, or loads it again: the new one replaces
// the old one once it is ready, and the old one is unloaded as an unload
// would.
func (s *Server) repositoryLoad(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	var req loadRequest
	if err := readRepoBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := checkModelName(name); err != nil {
		writeError(w, err)
		return
	}
	if !s.setState(name, StateLoading, "") {
		writeError(w, fmt.Errorf("%w: model %q is being loaded or unloaded", ErrConflict, name))
		return
	}
	// The load goes on if the client goes away: it is the server's state.
	ctx := context.WithoutCancel(r.Context())
	m, err := s.loadNamed(ctx, name, req.Parameters.RegistryRef)
	if err != nil {
		s.finishState(name, StateUnavailable, err.Error())
		s.log.Warn("model load failed", "model", name, "err", err)
		writeError(w, fmt.Errorf("%w: loading model %q: %w", ErrBadRequest, name, err))
		return
	}
	s.mu.Lock()
	old := s.models[name]
	if s.models == nil {
		s.models = map[string]*model{}
	}
	s.models[name] = m
	delete(s.states, name)
	s.mu.Unlock()
	if old != nil {
		old.gate.drain()
		closeModel(ctx, old)
	}
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "versions": m.versionNames(), "state": StateReady, "source": m.source})
}

// loadNamed loads model name from ref, or from Config.Models, or from the
// repository folder.
func (s *Server) loadNamed(ctx context.Context, name, ref string) (*model, error) {
	if ref == "" {
		ref = s.cfg.Models[name]
	}
	if ref != "" {
		return s.loadRegistryModel(ctx, name, ref)
	}
	if s.cfg.Repository == "" {
		return nil, fmt.Errorf("%w: no repository folder, and no parameters.registry_ref", ErrRepository)
	}
	return s.loadModel(ctx, filepath.Join(s.cfg.Repository, name))
}

// repositoryUnload takes a model out of service: new requests get 404 at
// once, those in flight finish, then its instances are closed.
func (s *Server) repositoryUnload(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("model")
	s.mu.Lock()
	m := s.models[name]
	busy := s.states[name].state == StateLoading || s.states[name].state == StateUnloading
	switch {
	case busy:
	case m == nil:
	default:
		delete(s.models, name)
		s.setStateLocked(name, StateUnloading, "requests in flight finishing")
	}
	s.mu.Unlock()
	if busy {
		writeError(w, fmt.Errorf("%w: model %q is being loaded or unloaded", ErrConflict, name))
		return
	}
	if m == nil {
		writeError(w, fmt.Errorf("%w: no model %q loaded", ErrNotFound, name))
		return
	}
	m.gate.drain()
	closeModel(context.WithoutCancel(r.Context()), m)
	s.finishState(name, StateUnavailable, "unloaded")
	s.log.Info("model unloaded", "model", name)
	writeJSON(w, http.StatusOK, map[string]any{"name": name, "state": StateUnavailable})
}

// setState marks name LOADING or UNLOADING unless a load or unload of it
// is under way already.
func (s *Server) setState(name, state, reason string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if st := s.states[name].state; st == StateLoading || st == StateUnloading {
		return false
	}
	s.setStateLocked(name, state, reason)
	return true
}

func (s *Server) setStateLocked(name, state, reason string) {
	if s.states == nil {
		s.states = map[string]modelStatus{}
	}
	s.states[name] = modelStatus{state, reason}
}

func (s *Server) finishState(name, state, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setStateLocked(name, state, reason)
}

// grpcExtensions are the extensions ServerMetadata names over gRPC: the
// KServe proto has no repository RPCs, so model_repository is REST's only.
var grpcExtensions = []string{"binary_tensor_data"}
