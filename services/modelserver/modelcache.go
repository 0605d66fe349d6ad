package modelserver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/modelartifact"
)

// manifestFile is a cache entry's manifest, written last: an entry without
// it is incomplete and fetched again.
const manifestFile = "manifest.json"

// ModelCache fetches model artifacts from the registry and keeps them in a
// local folder by manifest digest:
//
//	DIR/sha256/<hex>/config.json
//	DIR/sha256/<hex>/model.onnx or model.alidnn
//	DIR/sha256/<hex>/manifest.json     written last, atomically
//
// An entry is checked whenever it is used, the manifest against its digest
// and each file against the manifest's digest and size, so that a cached
// digest is reused after a restart without the network, and a damaged one
// is fetched again rather than served.
type ModelCache struct {
	dir    string
	remote modelartifact.Remote
	limits modelartifact.Limits
	log    *slog.Logger
}

// NewModelCache returns a cache in dir (created, mode 0700) that fetches
// with r's credentials within lim. log gets the fetches and pins (never the
// credentials); nil discards them.
func NewModelCache(dir string, r modelartifact.Remote, lim modelartifact.Limits, log *slog.Logger) (*ModelCache, error) {
	if dir == "" {
		return nil, errors.New("modelserver: the model cache needs a folder")
	}
	if err := os.MkdirAll(filepath.Join(dir, "sha256"), 0o700); err != nil {
		return nil, fmt.Errorf("modelserver: model cache: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if r.UserAgent == "" {
		r.UserAgent = DefaultName
	}
	return &ModelCache{dir: dir, remote: r, limits: lim, log: log}, nil
}

// cachedModel is an artifact in the cache, checked.
type cachedModel struct {
	Ref    string // pinned: REGISTRY/NS/REPO@sha256:…
	Dir    string // holds config.json and the model file, as a version folder does
	Config []byte
}

// Fetch returns the cached artifact of ref, fetching it first unless its
// digest is cached. A tag is resolved to a digest by asking the registry;
// a digest reference needs no network when cached.
func (c *ModelCache) Fetch(ctx context.Context, ref string) (*cachedModel, error) {
	d, err := modelartifact.Resolve(ctx, c.remote, ref, c.limits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRepository, err)
	}
	pinned := d.String()
	if pinned != ref {
		c.log.Info("model reference pinned", "ref", ref, "pinned", pinned)
	}
	dir := filepath.Join(c.dir, "sha256", strings.TrimPrefix(d.DigestStr(), "sha256:"))
	if cm, err := c.read(dir, d.DigestStr()); err == nil {
		cm.Ref = pinned
		c.log.Info("model from the cache", "ref", pinned)
		return cm, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		c.log.Warn("cached model damaged: fetching it again", "ref", pinned, "err", err)
	}
	a, err := modelartifact.Pull(ctx, c.remote, d, c.limits)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRepository, err)
	}
	if err := c.write(dir, a); err != nil {
		return nil, fmt.Errorf("modelserver: model cache: %w", err)
	}
	c.log.Info("model fetched", "ref", pinned, "model_bytes", len(a.Model))
	return &cachedModel{Ref: pinned, Dir: dir, Config: a.Config}, nil
}

func modelFileOf(m *modelartifact.Manifest) string {
	if m.IsONNX() {
		return ONNXFile
	}
	return ProgramFile
}

// write stores a in dir: the blobs, then the manifest that completes the
// entry. A file of another kind left by a damaged entry is removed, so that
// the folder holds one model file.
func (c *ModelCache) write(dir string, a *modelartifact.Artifact) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, manifestFile))
	for _, f := range []string{ONNXFile, ProgramFile} {
		if f != modelFileOf(a.Manifest) {
			_ = os.Remove(filepath.Join(dir, f))
		}
	}
	for name, b := range map[string][]byte{ConfigFile: a.Config, modelFileOf(a.Manifest): a.Model} {
		if err := atomicfile.Write(filepath.Join(dir, name), b, 0o600); err != nil {
			return err
		}
	}
	return atomicfile.Write(filepath.Join(dir, manifestFile), a.Raw, 0o600)
}

// read checks the entry in dir against digest; an incomplete entry is
// fs.ErrNotExist.
func (c *ModelCache) read(dir, digest string) (*cachedModel, error) {
	raw, err := os.ReadFile(filepath.Join(dir, manifestFile))
	if err != nil {
		return nil, err
	}
	if modelartifact.Digest(raw) != digest {
		return nil, fmt.Errorf("%s: %w: not the manifest of %s", dir, modelartifact.ErrInvalid, digest)
	}
	m, err := modelartifact.ParseManifest(raw, c.limits)
	if err != nil {
		return nil, err
	}
	cfg, err := readChecked(dir, ConfigFile, m.Config)
	if err != nil {
		return nil, err
	}
	if _, err := readChecked(dir, modelFileOf(m), m.Model()); err != nil {
		return nil, err
	}
	return &cachedModel{Dir: dir, Config: cfg}, nil
}

func readChecked(dir, name string, d modelartifact.Descriptor) ([]byte, error) {
	path := filepath.Join(dir, name)
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if st.Size() != d.Size {
		return nil, fmt.Errorf("%s: %w: %d bytes, the manifest says %d", path, modelartifact.ErrInvalid, st.Size(), d.Size)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return b, modelartifact.Verify(path, d, b)
}
