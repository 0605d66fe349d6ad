package loader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/cache"
)

// layerSizes returns the size of every layer of img and the total size of
// the distinct layers of ts, checking that img has them.
func layerSizes(img v1.Image, ts []*target) (map[v1.Hash]int64, int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, 0, fmt.Errorf("reading the layers of the image: %w", err)
	}
	sizes := map[v1.Hash]int64{}
	for _, ly := range layers {
		h, err := ly.Digest()
		if err != nil {
			return nil, 0, err
		}
		if sizes[h], err = ly.Size(); err != nil {
			return nil, 0, err
		}
	}
	var total int64
	seen := map[v1.Hash]bool{}
	for _, t := range ts {
		if _, ok := sizes[t.chip.Layer]; !ok {
			return nil, 0, fail(agentapi.CodeBadRequest, "", "the image config names layer %s, which the manifest lacks", t.chip.Layer)
		}
		if !seen[t.chip.Layer] {
			seen[t.chip.Layer] = true
			total += sizes[t.chip.Layer]
		}
	}
	return sizes, total, nil
}

// fetch brings each target's layer into the cache: a pull without a load.
func (r *run) fetch(ctx context.Context, repo name.Repository, img v1.Image, ts []*target) error {
	r.begin(agentapi.PhasePull)
	sizes, total, err := layerSizes(img, ts)
	if err != nil {
		return err
	}
	// Layers download in parallel; the cache shares a download between
	// targets of the same layer.
	var mu sync.Mutex
	got := map[v1.Hash]int64{}
	report := func(h v1.Hash, n int64) {
		mu.Lock()
		got[h] = n
		var sum int64
		for _, v := range got {
			sum += v
		}
		mu.Unlock()
		r.progress(agentapi.PhasePull, sum, total)
	}
	errs := make([]error, len(ts))
	hit := make([]bool, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		wg.Go(func() {
			b, h, err := r.l.cfg.Cache.Fetch(ctx, t.chip.Layer.String(), sizes[t.chip.Layer], func(ctx context.Context) (io.ReadCloser, error) {
				return r.getBlob(ctx, repo, t.chip.Layer)
			}, func(n int64) { report(t.chip.Layer, n) })
			if err != nil {
				errs[i] = cacheErr(t.chip.Layer.String(), err)
				return
			}
			// b pins the blob: AddUser finds it.
			_ = r.l.cfg.Cache.AddUser(t.chip.Layer.String(), r.req.Tenant.Name)
			hit[i] = h
			r.l.cfg.Metrics.fetched(h, b.Size())
			b.Close()
		})
	}
	wg.Wait()
	if err := joinErrs(errs); err != nil {
		return err
	}
	r.cur.Bytes, r.cur.CacheHit = total, !slices.Contains(hit, false)
	r.progress(agentapi.PhasePull, total, total)
	return nil
}

// open gives each target its layer as a stream: read from the cache if
// cached, and otherwise downloaded as the program phase reads it, filling the
// cache on the way (cache.Stream). Only the request is made here; what can
// refuse the load before a chip is touched (no room in the cache, a blob the
// registry refuses or cannot serve) refuses it here. A target whose layer an
// earlier target streams waits, in the program phase, for that stream to
// enter the cache.
func (r *run) open(ctx context.Context, repo name.Repository, img v1.Image, ts []*target) error {
	r.begin(agentapi.PhasePull)
	sizes, total, err := layerSizes(img, ts)
	if err != nil {
		return err
	}
	errs := make([]error, len(ts))
	hit := make([]bool, len(ts))
	seen := map[v1.Hash]bool{}
	var wg sync.WaitGroup
	for i, t := range ts {
		t.size = sizes[t.chip.Layer]
		if seen[t.chip.Layer] {
			continue
		}
		seen[t.chip.Layer] = true
		wg.Go(func() {
			t.stream, hit[i], errs[i] = r.stream(ctx, repo, t.chip.Layer, sizes[t.chip.Layer])
		})
	}
	wg.Wait()
	if err := joinErrs(errs); err != nil {
		return err
	}
	hits := true
	for i, t := range ts {
		if t.stream != nil {
			hits = hits && hit[i]
			r.l.cfg.Metrics.fetched(hit[i], t.stream.Size())
		}
	}
	r.cur.Bytes, r.cur.CacheHit = total, hits
	return nil
}

// stream opens layer d of repo through the cache.
func (r *run) stream(ctx context.Context, repo name.Repository, d v1.Hash, size int64) (*cache.Stream, bool, error) {
	s, hit, err := r.l.cfg.Cache.Stream(ctx, d.String(), size, func(ctx context.Context) (io.ReadCloser, error) {
		return r.getBlob(ctx, repo, d)
	})
	if err != nil {
		return nil, false, cacheErr(d.String(), err)
	}
	if hit {
		// The stream pins the blob: AddUser finds it.
		_ = r.l.cfg.Cache.AddUser(d.String(), r.req.Tenant.Name)
	}
	return s, hit, nil
}

// joinErrs joins the errors of parallel steps, keeping the code of the
// first *Error among them.
func joinErrs(errs []error) error {
	err := errors.Join(errs...)
	if err == nil {
		return nil
	}
	var le *Error
	if errors.As(err, &le) {
		return &Error{Code: le.Code, Hint: le.Hint, Err: err}
	}
	return err
}

// getBlob opens a blob of repo as the tenant. The bytes are checked once,
// by the cache, against the digest: a tampered layer is a digest mismatch
// there, and the layer is hashed once, not twice.
func (r *run) getBlob(ctx context.Context, repo name.Repository, d v1.Hash) (io.ReadCloser, error) {
	r.trOnce.Do(func() {
		auth := r.l.pullAuth(r.req.Tenant)
		r.tr, r.trErr = transport.NewWithContext(ctx, repo.Registry, auth, r.l.cfg.Transport, []string{repo.Scope(transport.PullScope)})
	})
	if r.trErr != nil {
		return nil, r.trErr
	}
	tr := r.tr
	u := url.URL{Scheme: repo.Registry.Scheme(), Host: repo.RegistryStr(), Path: "/v2/" + repo.RepositoryStr() + "/blobs/" + d.String()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, transport.CheckError(resp, http.StatusOK)
	}
	return resp.Body, nil
}
