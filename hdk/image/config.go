package image

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Config is the config blob of an image, of media type [ConfigMediaType].
// SPEC.md holds its JSON Schema.
type Config struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Vendor      string `json:"vendor"`
	Description string `json:"description,omitempty"`
	License     string `json:"license,omitempty"`
	Shell       Shell  `json:"shell"`
	// Board is the name of the board model, e.g. "faas-vu9p-dual".
	Board string `json:"board"`
	Chips []Chip `json:"chips"`
	// BothChipsRequired says that the chips must be loaded together, onto
	// the two chips of one board.
	BothChipsRequired bool       `json:"both_chips_required"`
	Resources         *Resources `json:"resources,omitempty"`
	Build             *BuildInfo `json:"build,omitempty"`
}

// Shell names the shells an image fits.
type Shell struct {
	Name string `json:"name"` // e.g. "faas-shell"
	// Versions is the range of accepted shell versions, e.g. ">=1.0,<2".
	Versions string `json:"versions"`
	// InterfaceUUID is the shell's PR interface UUID, in the canonical
	// 8-4-4-4-12 hex form.
	InterfaceUUID string `json:"interface_uuid"`
}

// Chip describes the bitstream for one chip of the board.
type Chip struct {
	Index ChipIndex `json:"index"`
	// Part is the FPGA part the bitstream is for, as the shell names it.
	Part string `json:"part"`
	Role Role   `json:"role"`
	// Clocks are the role's clock frequencies in MHz, by clock name.
	Clocks map[string]float64 `json:"clocks,omitempty"`
	// Layer is the digest of the layer holding the bitstream.
	Layer v1.Hash `json:"layer"`
	// Sealed says that the layer is sealed ([SealedBitstreamMediaType]).
	Sealed bool `json:"sealed"`
}

// Role identifies the role a bitstream implements.
type Role struct {
	Name    string `json:"name" yaml:"name"`
	Version string `json:"version" yaml:"version"`
	// ISAVersion is the version of the instruction set the role executes,
	// for roles that have one (AliDNN).
	ISAVersion string `json:"isa_version,omitempty" yaml:"isa_version"`
}

// Resources are what an image needs besides the chips.
type Resources struct {
	DDRBytes uint64  `json:"ddr_bytes,omitempty" yaml:"ddr_bytes"` // DDR per chip
	PowerW   float64 `json:"power_w,omitempty" yaml:"power_w"`     // board power, in watts
}

// BuildInfo records how the bitstreams were built.
type BuildInfo struct {
	Tool   string `json:"tool,omitempty" yaml:"tool"`     // e.g. "vivado 2024.1"
	Date   string `json:"date,omitempty" yaml:"date"`     // RFC 3339
	Source string `json:"source,omitempty" yaml:"source"` // e.g. a repository URL and commit
}

// ChipIndex is the index of a chip on its board, 0 or 1, or [AnyChip]. In JSON
// it is the number or the string "any".
type ChipIndex int

// AnyChip is the index of a bitstream that may be loaded onto either chip.
const AnyChip ChipIndex = -1

// Valid reports whether x is 0, 1 or AnyChip.
func (x ChipIndex) Valid() bool { return x == 0 || x == 1 || x == AnyChip }

func (x ChipIndex) String() string {
	if x == AnyChip {
		return "any"
	}
	return strconv.Itoa(int(x))
}

// MarshalJSON implements json.Marshaler.
func (x ChipIndex) MarshalJSON() ([]byte, error) {
	if !x.Valid() {
		return nil, fmt.Errorf("image: invalid chip index %d", int(x))
	}
	if x == AnyChip {
		return []byte(`"any"`), nil
	}
	return strconv.AppendInt(nil, int64(x), 10), nil
}

// UnmarshalJSON implements json.Unmarshaler.
func (x *ChipIndex) UnmarshalJSON(b []byte) error {
	switch string(b) {
	case "0":
		*x = 0
	case "1":
		*x = 1
	case `"any"`:
		*x = AnyChip
	default:
		// An UnmarshalTypeError gets the field's path from encoding/json.
		return &json.UnmarshalTypeError{Value: "chip index " + string(b) + ` (want 0, 1 or "any")`, Type: reflect.TypeFor[ChipIndex]()}
	}
	return nil
}

// UnmarshalJSON implements json.Unmarshaler, so that a malformed layer digest
// is reported with its field.
func (c *Chip) UnmarshalJSON(b []byte) error {
	type chip Chip // without methods
	var raw struct {
		*chip
		Layer string `json:"layer"`
	}
	raw.chip = (*chip)(c)
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw.Layer == "" {
		c.Layer = v1.Hash{}
		return nil
	}
	h, err := v1.NewHash(raw.Layer)
	if err != nil {
		return &json.UnmarshalTypeError{Value: fmt.Sprintf("digest %q (%v)", raw.Layer, err), Type: reflect.TypeFor[v1.Hash](), Field: "layer"}
	}
	c.Layer = h
	return nil
}

// ParseConfig decodes and checks a config. Unknown fields are ignored, so
// that configs written by newer tools of the same major version still parse.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	d := json.NewDecoder(bytes.NewReader(b))
	if err := d.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("image: parsing config: %w", err)
	}
	if d.More() {
		return Config{}, fmt.Errorf("image: parsing config: data after the JSON object")
	}
	if err := c.check(); err != nil {
		return Config{}, fmt.Errorf("image: config: %w", err)
	}
	return c, nil
}

// check makes the checks every consumer of a config relies on: the required
// fields are set, and each chip names its layer.
func (c *Config) check() error {
	for _, f := range []struct{ name, value string }{
		{"name", c.Name}, {"version", c.Version}, {"vendor", c.Vendor},
		{"shell.name", c.Shell.Name}, {"board", c.Board},
	} {
		if f.value == "" {
			return fmt.Errorf("%s: missing", f.name)
		}
	}
	if len(c.Chips) == 0 {
		return fmt.Errorf("chips: missing")
	}
	for i, ch := range c.Chips {
		switch {
		case ch.Part == "":
			return fmt.Errorf("chips[%d].part: missing", i)
		case ch.Role.Name == "":
			return fmt.Errorf("chips[%d].role.name: missing", i)
		case ch.Layer.Algorithm == "" || ch.Layer.Hex == "":
			return fmt.Errorf("chips[%d].layer: missing", i)
		}
	}
	return nil
}
