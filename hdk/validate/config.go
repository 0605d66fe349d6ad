package validate

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/fpga-faas/faas/bitstreams/roles"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/shell"
)

// wireConfig decodes a config like image.Config, but keeps what
// image.ParseConfig would refuse outright (a bad chip index, a malformed
// layer digest) so that it can be reported with its own code and field.
type wireConfig struct {
	image.Config
	// Chips shadows Config.Chips; each is decoded on its own, so that a
	// type error is reported with the chip's position.
	Chips []json.RawMessage `json:"chips"`
}

// wireChip has the members of image.Chip; it does not embed it, which would
// bring along Chip's UnmarshalJSON.
type wireChip struct {
	Index  json.RawMessage    `json:"index"`
	Part   string             `json:"part"`
	Role   image.Role         `json:"role"`
	Clocks map[string]float64 `json:"clocks"`
	Layer  string             `json:"layer"`
	Sealed bool               `json:"sealed"`
}

// config is a decoded config, with what the layer checks need to know of
// each chip.
type config struct {
	wireConfig
	chips []chip // decoded from wireConfig.Chips
}

// chip is a decoded chip, with what the checks of the config established
// about it.
type chip struct {
	wireChip
	part     shell.Part // zero if the part is unknown
	layer    v1.Hash    // zero if missing or malformed
	layerIdx int        // the manifest layer matched to it, or -1
}

// object decodes raw as a JSON object, or returns nil.
func object(raw json.RawMessage) map[string]json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	return m
}

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// checkConfig decodes raw and checks it. It returns nil if raw does not
// decode, so that no check relies on it.
func (c *checker) checkConfig(raw []byte) *config {
	top := object(raw)
	if top == nil {
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			c.add(ConfigInvalid, -1, "", "the config does not parse: %v", err)
		} else {
			c.add(ConfigInvalid, -1, "", "the config is not a JSON object")
		}
		return nil
	}
	var w wireConfig
	if !c.decode(raw, &w, "") {
		return nil
	}
	chips := make([]wireChip, len(w.Chips))
	for i, b := range w.Chips {
		if !c.decode(b, &chips[i], fmt.Sprintf("chips[%d]", i)) {
			return nil
		}
	}
	errorsBefore := c.errors()
	cfg := &config{wireConfig: w, chips: make([]chip, len(chips))}
	for i, ch := range chips {
		cfg.chips[i] = chip{wireChip: ch, layerIdx: -1}
	}

	c.unknown(top, reflect.TypeFor[image.Config](), "", -1)
	for _, f := range []struct {
		key   string
		empty bool
	}{
		{"name", w.Name == ""}, {"version", w.Version == ""}, {"vendor", w.Vendor == ""},
		{"shell", false}, {"board", w.Board == ""}, {"chips", len(chips) == 0}, {"both_chips_required", false},
	} {
		c.require(top, f.key, f.key, -1, f.empty)
	}
	c.checkShell(object(top["shell"]), w.Shell)
	model, modelOK := shell.BoardModel{}, false
	if w.Board != "" {
		var err error
		if model, err = shell.ModelByName(w.Board); err != nil {
			c.add(BoardUnknown, -1, "board", "board %q is not a board model of shell v%d", w.Board, shell.VersionMajor)
		} else {
			modelOK = true
		}
	}
	indices := make(map[image.ChipIndex]int)
	indicesOK := true
	for i, ch := range chips {
		x, valid, isNew := c.checkChip(cfg, i, ch, object(w.Chips[i]), indices)
		indicesOK = indicesOK && isNew
		c.checkPart(cfg, i, ch, x, valid && modelOK, model)
	}
	if w.BothChipsRequired && indicesOK {
		_, has0 := indices[0]
		_, has1 := indices[1]
		if !has0 || !has1 || len(chips) != shell.ChipsPerBoard {
			c.add(BothChipsIncomplete, -1, "both_chips_required", "both_chips_required is set, but the chips are not exactly chip 0 and chip 1")
		}
	}
	if res := object(top["resources"]); res != nil {
		c.unknown(res, reflect.TypeFor[image.Resources](), "resources", -1)
		if w.Resources != nil && w.Resources.PowerW < 0 {
			c.add(FieldInvalid, -1, "resources.power_w", "power_w is %v, want at least 0", w.Resources.PowerW)
		}
	}
	if b := object(top["build"]); b != nil {
		c.unknown(b, reflect.TypeFor[image.BuildInfo](), "build", -1)
		if w.Build != nil && w.Build.Date != "" {
			if _, err := time.Parse(time.RFC3339, w.Build.Date); err != nil {
				c.add(FieldInvalid, -1, "build.date", "date %q is not an RFC 3339 date-time", w.Build.Date)
			}
		}
	}
	// Whatever this package accepts, the consumers of images must accept
	// too: a config without findings must parse as they parse it.
	if c.errors() == errorsBefore {
		if _, err := image.ParseConfig(raw); err != nil {
			c.add(ConfigInvalid, -1, "", "%v", err)
		}
	}
	return cfg
}

// checkShell checks the shell member, obj as JSON, s decoded.
func (c *checker) checkShell(obj map[string]json.RawMessage, s image.Shell) {
	if obj == nil {
		return // missing, reported by the caller
	}
	c.unknown(obj, reflect.TypeFor[image.Shell](), "shell", -1)
	if c.require(obj, "name", "shell.name", -1, s.Name == "") && s.Name != shell.Name {
		c.add(ShellUnknown, -1, "shell.name", "shell %q is not the platform's shell %q", s.Name, shell.Name)
	}
	if c.require(obj, "versions", "shell.versions", -1, false) {
		current := version{shell.VersionMajor, shell.VersionMinor}
		r, err := parseRange(s.Versions)
		switch {
		case err != nil:
			c.add(ShellVersionInvalid, -1, "shell.versions", "versions %q: %v", s.Versions, err)
		case !r.contains(current):
			c.add(ShellVersionInvalid, -1, "shell.versions", "versions %q do not include the current shell version %d.%d", s.Versions, current.major, current.minor)
		}
	}
	if c.require(obj, "interface_uuid", "shell.interface_uuid", -1, false) {
		want := hex.EncodeToString(shell.InterfaceUUID[:])
		switch u := s.InterfaceUUID; {
		case !uuidRE.MatchString(u):
			c.add(FieldInvalid, -1, "shell.interface_uuid", "interface_uuid %q is not a UUID in lower-case 8-4-4-4-12 form", u)
		case strings.ReplaceAll(u, "-", "") != want:
			c.add(ShellInterfaceMismatch, -1, "shell.interface_uuid", "interface_uuid %s is not the PR interface of shell v%d.%d", u, shell.VersionMajor, shell.VersionMinor)
		}
	}
}

// checkChip checks chips[i] but for its part and records its layer in cfg.
// It returns the chip's index, whether there is one, and whether it is new:
// not given by an earlier entry.
func (c *checker) checkChip(cfg *config, i int, ch wireChip, obj map[string]json.RawMessage, indices map[image.ChipIndex]int) (x image.ChipIndex, valid, isNew bool) {
	p := fmt.Sprintf("chips[%d]", i)
	if obj == nil {
		c.add(ConfigInvalid, i, p, "%s is null, want an object", p)
		return 0, false, false
	}
	c.unknown(obj, reflect.TypeFor[image.Chip](), p, i)
	for _, f := range []struct {
		key   string
		empty bool
	}{
		{"index", false}, {"part", ch.Part == ""}, {"role", false}, {"layer", ch.Layer == ""}, {"sealed", false},
	} {
		c.require(obj, f.key, p+"."+f.key, i, f.empty)
	}
	if role := object(obj["role"]); role != nil {
		c.unknown(role, reflect.TypeFor[image.Role](), p+".role", i)
		name := c.require(role, "name", p+".role.name", i, ch.Role.Name == "")
		vers := c.require(role, "version", p+".role.version", i, ch.Role.Version == "")
		c.checkRole(i, ch.Role, name, vers)
	}
	if ch.Layer != "" {
		if h, err := v1.NewHash(ch.Layer); err != nil {
			c.add(FieldInvalid, i, p+".layer", "layer %q is not a sha256 digest: %v", ch.Layer, err)
		} else {
			cfg.chips[i].layer = h
		}
	}
	for _, name := range slices.Sorted(maps.Keys(ch.Clocks)) {
		if mhz := ch.Clocks[name]; !(mhz > 0) {
			c.add(FieldInvalid, i, p+".clocks."+name, "clock %q is %v MHz, want more than 0", name, mhz)
		}
	}

	if len(ch.Index) == 0 || string(ch.Index) == "null" {
		return 0, false, false // missing, reported above
	}
	// ChipIndex's own decoding, so that this package and image.ParseConfig
	// agree on what an index is.
	if err := x.UnmarshalJSON(ch.Index); err != nil {
		c.add(ChipIndexInvalid, i, p+".index", "index %s is not 0, 1 or \"any\"", ch.Index)
		return 0, false, false
	}
	_, dup := indices[x]
	_, anyGiven := indices[image.AnyChip]
	if dup || anyGiven || (x == image.AnyChip && len(indices) > 0) {
		c.add(ChipIndexInvalid, i, p+".index", "chip %s given again: each chip is given once, and \"any\" only alone", x)
		return x, true, false
	}
	indices[x] = i
	return x, true, true
}

// checkRole checks a chip's role against the catalog, as far as its name
// and version are there to check.
func (c *checker) checkRole(i int, r image.Role, hasName, hasVersion bool) {
	p := fmt.Sprintf("chips[%d].role", i)
	if !hasName {
		return
	}
	if _, ok := roles.Lookup(r.Name); !ok {
		c.add(RoleUnknown, i, p+".name", "role %q is not a role of the platform", r.Name)
		return
	}
	if !hasVersion {
		return
	}
	if err := roles.Check(r.Name, r.Version); err != nil {
		c.add(RoleVersionIncompatible, i, p+".version", "%v", err)
	}
}

// checkPart checks that chips[i]'s part is a part of the shell, and if
// onBoard, that it is the part of model on chip x (on both chips for "any").
func (c *checker) checkPart(cfg *config, i int, ch wireChip, x image.ChipIndex, onBoard bool, model shell.BoardModel) {
	if ch.Part == "" {
		return
	}
	field := fmt.Sprintf("chips[%d].part", i)
	part, err := shell.PartByName(ch.Part)
	if err != nil {
		c.add(PartMismatch, i, field, "part %q is not a part of shell v%d", ch.Part, shell.VersionMajor)
		return
	}
	cfg.chips[i].part = part
	if !onBoard {
		return
	}
	on := []int{int(x)}
	if x == image.AnyChip {
		on = []int{0, 1}
	}
	for _, n := range on {
		if model.Parts[n] != part {
			c.add(PartMismatch, i, field, "part %s, but chip %d of board %s is %s", part.Name, n, model.Name, model.Parts[n].Name)
			return
		}
	}
}

// require reports a FIELD_MISSING finding if key is not in obj or is null,
// or if it is but empty is true, and reports whether the field is there and
// not empty.
func (c *checker) require(obj map[string]json.RawMessage, key, field string, chip int, empty bool) bool {
	if v, ok := obj[key]; !ok || string(v) == "null" {
		c.add(FieldMissing, chip, field, "%s is missing", field)
		return false
	}
	if empty {
		c.add(FieldMissing, chip, field, "%s is empty", field)
		return false
	}
	return true
}

// unknown warns of the members of obj that are not fields of t, the type
// that decodes it: SPEC.md lets readers ignore them, but an unknown member
// is more often a misspelt optional one than a newer tool's.
func (c *checker) unknown(obj map[string]json.RawMessage, t reflect.Type, path string, chip int) {
	known := make(map[string]bool)
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		known[name] = true
	}
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		if !known[key] {
			field := key
			if path != "" {
				field = path + "." + key
			}
			c.add(FieldUnknown, chip, field, "%s is not a member of the config schema; readers ignore it", field)
		}
	}
}

// errors counts the findings of severity error so far.
func (c *checker) errors() int {
	n := 0
	for _, f := range c.r.Findings {
		if f.Severity == SeverityError {
			n++
		}
	}
	return n
}

// decode decodes the JSON of the config at path into v, reporting a
// CONFIG_INVALID finding if it does not decode.
func (c *checker) decode(b []byte, v any, path string) bool {
	err := json.Unmarshal(b, v)
	if err == nil {
		return true
	}
	te, ok := errors.AsType[*json.UnmarshalTypeError](err)
	if !ok {
		c.add(ConfigInvalid, -1, path, "the config does not decode: %v", err)
		return false
	}
	field := jsonPath(te.Field)
	if path != "" {
		field = path + "." + field
	}
	c.add(ConfigInvalid, -1, field, "%s is a JSON %s, want %s", field, te.Value, kind(te.Type))
	return false
}

// kind names the JSON type that decodes into t.
func kind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return "number"
}

// jsonPath turns the path of a json.UnmarshalTypeError, "chips.0.part", into
// the form of findings, "chips[0].part".
func jsonPath(p string) string {
	var b strings.Builder
	for i, s := range strings.Split(p, ".") {
		if _, err := strconv.Atoi(s); err == nil {
			b.WriteString("[" + s + "]")
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}
