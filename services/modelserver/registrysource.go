package modelserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// artifactVersion is the one version a registry model has: an artifact is
// one model file, and its digest, not a folder name, tells versions apart.
const artifactVersion = "1"

// loadRegistryModels loads Config.Models into models, refusing a name a
// repository folder has too.
func (s *Server) loadRegistryModels(ctx context.Context, models map[string]*model) error {
	names := make([]string, 0, len(s.cfg.Models))
	for name := range s.cfg.Models {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if models[name] != nil {
			return fmt.Errorf("model %s: %w: both a repository folder and a registry reference", name, ErrRepository)
		}
		m, err := s.loadRegistryModel(ctx, name, s.cfg.Models[name])
		if err != nil {
			return fmt.Errorf("model %s: %w", name, err)
		}
		models[name] = m
	}
	return nil
}

// loadRegistryModel fetches ref through the cache (pinning a tag to its
// digest) and opens it as model name, version 1.
func (s *Server) loadRegistryModel(ctx context.Context, name, ref string) (*model, error) {
	if s.cfg.Cache == nil {
		return nil, fmt.Errorf("%w: models from the registry need a model cache (the command's -model-cache)", ErrRepository)
	}
	if err := checkModelName(name); err != nil {
		return nil, err
	}
	start := time.Now()
	cm, err := s.cfg.Cache.Fetch(ctx, ref)
	if err != nil {
		return nil, err
	}
	c, err := parseArtifactConfig(cm.Config, name)
	if err != nil {
		return nil, fmt.Errorf("%s: config: %w", cm.Ref, err)
	}
	m, err := s.openModel(ctx, c, cm.Ref, cm.Dir, nil)
	if err != nil {
		return nil, err
	}
	v, err := s.loadVersion(ctx, cm.Dir, c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cm.Ref, err)
	}
	v.name = artifactVersion
	m.versions = []*version{v}
	s.log.Info("model loaded", "model", name, "version", artifactVersion, "ref", cm.Ref, "instances", len(v.instances), "took", time.Since(start))
	return m, nil
}

// parseArtifactConfig parses an artifact's config.json as the model
// served under name: its "name" may be left out (faas model push without
// --config pushes {}), and if given must be name.
func parseArtifactConfig(b []byte, name string) (*ModelConfig, error) {
	var peek struct {
		Name string `json:"name"`
	}
	if len(b) <= maxConfigBytes {
		_ = json.Unmarshal(bytes.TrimSpace(b), &peek)
	}
	c, err := parseConfig(b, peek.Name)
	if err != nil {
		return nil, err
	}
	if c.Name != "" && c.Name != name {
		return nil, fmt.Errorf("%w: name %q differs from the name it is served under, %q", ErrRepository, c.Name, name)
	}
	c.Name = name
	return c, nil
}

// checkModelName refuses a name that is not one path segment of the
// URLs, or could name a folder outside the repository.
func checkModelName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.ContainsAny(name, "/\\\x00") || len(name) > 128 {
		return fmt.Errorf("%w: model name %q: want one path segment, not hidden, at most 128 bytes", ErrBadRequest, name)
	}
	return nil
}
