package validate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/hdk/image"
)

// Default limits of [Options].
const (
	DefaultMaxConfigBytes = 1 << 20
	DefaultMaxLayerBytes  = 512 << 20
	// DefaultMaxLayers is one layer per chip of a dual-chip board.
	DefaultMaxLayers = 2
)

// Options configure [Image]. The zero value checks with the default limits
// and reads only the .bit header of plain layers.
type Options struct {
	MaxConfigBytes int64 // 0 means DefaultMaxConfigBytes
	MaxLayerBytes  int64 // per layer; 0 means DefaultMaxLayerBytes
	MaxLayers      int   // 0 means DefaultMaxLayers
	// FullStream parses the whole configuration stream of each plain layer
	// as the PR controller will (sync word, packets, CRC, DESYNC) and checks
	// that it writes the IDCODE of the chip's part. It costs a CRC over
	// every byte; without it only the .bit header is parsed, though every
	// byte is still read to verify the layer's digest.
	FullStream bool
}

func (o Options) withDefaults() Options {
	if o.MaxConfigBytes <= 0 {
		o.MaxConfigBytes = DefaultMaxConfigBytes
	}
	if o.MaxLayerBytes <= 0 {
		o.MaxLayerBytes = DefaultMaxLayerBytes
	}
	if o.MaxLayers <= 0 {
		o.MaxLayers = DefaultMaxLayers
	}
	return o
}

// Finding is one problem of an image.
type Finding struct {
	Code     Code     `json:"code"`
	Severity Severity `json:"severity"`
	// Chip is the position in the config's chips of the entry the finding
	// is about, or -1 if it is about no chip.
	Chip int `json:"chip"`
	// Field is the JSON path of the field at fault, in the config (e.g.
	// "chips[1].part") or, for "mediaType", "config.…" and "layers[…]…",
	// in the manifest; empty if the finding is about no field.
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

func (f Finding) String() string {
	s := string(f.Code)
	if f.Severity == SeverityWarning {
		s += " (warning)"
	}
	if f.Field != "" {
		s += ": " + f.Field
	}
	return s + ": " + f.Message
}

// Report is the outcome of checking an image.
type Report struct {
	Findings []Finding `json:"findings"`
}

// ErrInvalid is wrapped by the error of a report with errors.
var ErrInvalid = errors.New("invalid image")

// OK reports whether the image has no finding of severity error.
func (r Report) OK() bool {
	for _, f := range r.Findings {
		if f.Severity == SeverityError {
			return false
		}
	}
	return true
}

// Err returns nil if r is OK, and otherwise an error wrapping ErrInvalid that
// lists the codes of the errors found, e.g. "validate: invalid image:
// ROLE_MISMATCH, LAYER_MISSING".
func (r Report) Err() error {
	var list []string
	seen := make(map[Code]bool)
	for _, f := range r.Findings {
		if f.Severity == SeverityError && !seen[f.Code] {
			seen[f.Code] = true
			list = append(list, string(f.Code))
		}
	}
	if len(list) == 0 {
		return nil
	}
	return fmt.Errorf("validate: %w: %s", ErrInvalid, strings.Join(list, ", "))
}

// Has reports whether r has a finding of code c.
func (r Report) Has(c Code) bool {
	for _, f := range r.Findings {
		if f.Code == c {
			return true
		}
	}
	return false
}

// checker holds the state of one run of Image.
type checker struct {
	ctx  context.Context
	img  v1.Image
	opts Options
	r    Report
}

func (c *checker) add(code Code, chip int, field, format string, args ...any) {
	c.r.Findings = append(c.r.Findings, Finding{
		Code: code, Severity: severity(code), Chip: chip, Field: field,
		Message: fmt.Sprintf(format, args...),
	})
}

// Image checks img and reports everything found wrong with it.
func Image(ctx context.Context, img v1.Image, opts Options) Report {
	c := &checker{ctx: ctx, img: img, opts: opts.withDefaults(), r: Report{Findings: []Finding{}}}
	mf, ok := c.manifest()
	if !ok {
		return c.r
	}
	cfg := c.config(mf) // nil if the config could not be checked
	layers := c.layers(mf, cfg)
	if cfg != nil {
		c.bitstreams(mf, cfg, layers)
	}
	return c.r
}

// manifest reads and checks the manifest. It reports false if there is no
// manifest to check further.
func (c *checker) manifest() (*v1.Manifest, bool) {
	raw, err := c.img.RawManifest()
	if err != nil {
		c.add(ReadFailed, -1, "", "reading the manifest: %v", err)
		return nil, false
	}
	mf, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		c.add(ManifestInvalid, -1, "", "the manifest does not parse: %v", err)
		return nil, false
	}
	if mf.SchemaVersion != 2 {
		c.add(ManifestInvalid, -1, "schemaVersion", "schemaVersion is %d, want 2", mf.SchemaVersion)
	}
	if mf.MediaType != types.OCIManifestSchema1 {
		c.add(ManifestInvalid, -1, "mediaType", "media type %q, want %q", mf.MediaType, types.OCIManifestSchema1)
	}
	if mf.ArtifactType != image.ArtifactType {
		c.add(ArtifactTypeInvalid, -1, "artifactType", "artifactType %q, want %q", mf.ArtifactType, image.ArtifactType)
	}
	return mf, true
}

// config reads the config and checks it. It returns nil if the config could
// not be read or decoded, so that checks relating chips to layers are skipped.
func (c *checker) config(mf *v1.Manifest) *config {
	d := mf.Config
	if d.MediaType != image.ConfigMediaType {
		// Not our config: its fields would only give noise.
		c.add(ConfigInvalid, -1, "config.mediaType", "config media type %q, want %q", d.MediaType, image.ConfigMediaType)
		return nil
	}
	// The descriptor's size is checked first so that an oversized config is
	// never fetched; registries check the size of what they serve against
	// it, and so does the comparison below.
	if d.Size > c.opts.MaxConfigBytes {
		c.add(ConfigTooLarge, -1, "config.size", "config is %d bytes, more than the limit of %d", d.Size, c.opts.MaxConfigBytes)
		return nil
	}
	raw, err := c.img.RawConfigFile()
	if err != nil {
		c.add(ReadFailed, -1, "config", "reading the config: %v", err)
		return nil
	}
	if int64(len(raw)) > c.opts.MaxConfigBytes {
		c.add(ConfigTooLarge, -1, "config.size", "config is %d bytes, more than the limit of %d", len(raw), c.opts.MaxConfigBytes)
		return nil
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != d.Digest.String() || int64(len(raw)) != d.Size {
		c.add(ConfigDigestMismatch, -1, "config.digest", "config is %d bytes of digest %s, the descriptor says %d bytes of %s", len(raw), got, d.Size, d.Digest)
	}
	return c.checkConfig(raw)
}
