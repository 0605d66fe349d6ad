package image

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/fpga-faas/faas/shell"
)

// DefaultShellVersions is the range of shell versions an image accepts when
// its manifest names none: any of the current major version.
const DefaultShellVersions = ">=1.0,<2"

// Manifest is an image.yaml, the ISV's description of an image to build:
//
//	name: loopback
//	version: 1.0.0
//	vendor: Example Inc.
//	description: DMA loopback and checksum
//	license: Apache-2.0
//	board: faas-vu9p-dual
//	shell: ">=1.0,<2"
//	chips:
//	  - index: 0            # 0, 1 or any
//	    bitstream: loopback.bit
//	    role: {name: loopback, version: "1.0"}
//	both_chips: false
//
// Optional: clocks (MHz by name) and role.isa_version per chip, resources
// {ddr_bytes, power_w} and build {tool, date, source}. Unknown keys are
// errors.
type Manifest struct {
	// File is the path of the image.yaml; bitstream paths are relative to
	// its directory. Load and Parse set it.
	File string `yaml:"-"`

	Name        string         `yaml:"name"`
	Version     string         `yaml:"version"`
	Vendor      string         `yaml:"vendor"`
	Description string         `yaml:"description"`
	License     string         `yaml:"license"`
	Board       string         `yaml:"board"` // board model, e.g. "faas-vu9p-dual"
	Shell       string         `yaml:"shell"` // accepted shell versions; DefaultShellVersions if empty
	Chips       []ManifestChip `yaml:"chips"`
	BothChips   bool           `yaml:"both_chips"`
	Resources   *Resources     `yaml:"resources"`
	Build       *BuildInfo     `yaml:"build"`

	lines map[string]int // line of each field, by path, for errors
}

// ManifestChip is one entry of a manifest's chips.
type ManifestChip struct {
	Index ChipIndex `yaml:"index"`
	// Bitstream is the path of the .bit file, relative to the manifest's
	// directory and inside it.
	Bitstream string             `yaml:"bitstream"`
	Role      Role               `yaml:"role"`
	Clocks    map[string]float64 `yaml:"clocks"`
	// Part is the shell's name of the part the bitstream is for, filled in
	// from its .bit header by Load and Parse.
	Part string `yaml:"-"`
}

// UnmarshalYAML implements yaml.Unmarshaler: an index is 0, 1 or any.
func (x *ChipIndex) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		switch n.Value {
		case "0":
			*x = 0
			return nil
		case "1":
			*x = 1
			return nil
		case "any":
			*x = AnyChip
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %q is out of range: want 0, 1 or any", n.Line, n.Value)}}
}

// ManifestError locates a problem in a manifest.
type ManifestError struct {
	File  string // path of the image.yaml
	Line  int    // 1-based; 0 if unknown
	Field string // e.g. "chips[1].bitstream"; empty for syntax errors
	Err   error
}

func (e *ManifestError) Error() string {
	loc := e.File
	if loc == "" {
		loc = "image: manifest"
	}
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field == "" {
		return fmt.Sprintf("%s: %v", loc, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", loc, e.Field, e.Err)
}

func (e *ManifestError) Unwrap() error { return e.Err }

// Load reads the manifest at path and the .bit headers of its bitstreams;
// see [Parse].
func Load(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Manifest{}, fmt.Errorf("image: reading manifest: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes data, the contents of the manifest at path file, checks it,
// and reads the .bit header of each bitstream to fill in its part. The
// header must name the chip's part of the board model and a design name equal
// to the role name. Errors are [*ManifestError]s.
func Parse(file string, data []byte) (Manifest, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return Manifest{}, yamlError(file, err, nil)
	}
	if len(root.Content) == 0 {
		return Manifest{}, &ManifestError{File: file, Err: errors.New("empty manifest")}
	}
	if root.Content[0].Kind != yaml.MappingNode {
		return Manifest{}, &ManifestError{File: file, Line: root.Content[0].Line, Err: errors.New("manifest is not a mapping")}
	}
	lines := make(map[string]int)
	indexLines(lines, "", root.Content[0])
	var m Manifest
	d := yaml.NewDecoder(bytes.NewReader(data))
	d.KnownFields(true)
	if err := d.Decode(&m); err != nil {
		return Manifest{}, yamlError(file, err, lines)
	}
	m.File, m.lines = file, lines
	if err := m.check(); err != nil {
		return Manifest{}, err
	}
	for i := range m.Chips {
		c := &m.Chips[i]
		h, err := readHeader(m.path(c.Bitstream))
		if err != nil {
			return Manifest{}, m.errorf(fmt.Sprintf("chips[%d].bitstream", i), "%w", err)
		}
		part, err := m.checkHeader(i, h)
		if err != nil {
			return Manifest{}, err
		}
		c.Part = part.Name
	}
	return m, nil
}

// yamlError returns a ManifestError for an error of the YAML decoder, whose
// messages read "yaml: line 3: did not find expected key" or, for a
// *yaml.TypeError, list lines of the form "line 3: field x not found in type
// image.Manifest". The error's field is found in lines, by line.
func yamlError(file string, err error, lines map[string]int) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var more int
	if te, ok := err.(*yaml.TypeError); ok && len(te.Errors) > 0 {
		msg, more = te.Errors[0], len(te.Errors)-1
	}
	line := 0
	if m := lineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	}
	key := ""
	if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
		key, msg = m[1], "unknown field"
	}
	if more > 0 {
		msg += fmt.Sprintf(" (and %d more)", more)
	}
	return &ManifestError{File: file, Line: line, Field: fieldAt(lines, line, key), Err: errors.New(msg)}
}

var (
	lineRE         = regexp.MustCompile(`^line (\d+): `)
	unknownFieldRE = regexp.MustCompile(`^field (.*) not found in type \S+$`)
)

// fieldAt returns the innermost field of lines on line, named key if key is
// not empty, or "" if there is no such field or more than one (as on a line
// of flow style, "role: {name: x, version: y}").
func fieldAt(lines map[string]int, line int, key string) string {
	var found []string
	depth := -1
	for p, l := range lines {
		if l != line || p == "" || key != "" && p != key && !strings.HasSuffix(p, "."+key) {
			continue
		}
		switch d := strings.Count(p, ".") + strings.Count(p, "["); {
		case d > depth:
			found, depth = []string{p}, d
		case d == depth:
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// indexLines records in lines the line of n and of every node under it, by
// field path: "chips[0].role.name".
func indexLines(lines map[string]int, path string, n *yaml.Node) {
	lines[path] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := n.Content[i].Value
			if path != "" {
				key = path + "." + key
			}
			indexLines(lines, key, n.Content[i+1])
			lines[key] = n.Content[i].Line
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			indexLines(lines, fmt.Sprintf("%s[%d]", path, i), c)
		}
	}
}

// errorf returns a ManifestError for field, at the line of the field or of
// the nearest enclosing field the manifest has.
func (m *Manifest) errorf(field, format string, args ...any) error {
	line, ok := 0, false
	for p := field; !ok && p != ""; p = parentPath(p) {
		line, ok = m.lines[p]
	}
	return &ManifestError{File: m.File, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

// parentPath returns the path of the field enclosing path's.
func parentPath(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '.' || path[i] == '[' {
			return path[:i]
		}
	}
	return ""
}

// path returns the path of a bitstream named in the manifest.
func (m *Manifest) path(rel string) string {
	return filepath.Join(filepath.Dir(m.File), filepath.FromSlash(rel))
}

// check checks the fields of m without reading the bitstreams.
func (m *Manifest) check() error {
	for _, f := range []struct{ name, value string }{
		{"name", m.Name}, {"version", m.Version}, {"vendor", m.Vendor}, {"board", m.Board},
	} {
		if f.value == "" {
			return m.errorf(f.name, "missing")
		}
	}
	if _, err := shell.ModelByName(m.Board); err != nil {
		return m.errorf("board", "%w", err)
	}
	switch n := len(m.Chips); {
	case n == 0:
		return m.errorf("chips", "missing")
	case n > shell.ChipsPerBoard:
		return m.errorf("chips", "%d chips, but a board has %d", n, shell.ChipsPerBoard)
	case m.BothChips && n != shell.ChipsPerBoard:
		return m.errorf("both_chips", "set, but the image has %d chip", n)
	}
	seen := make(map[ChipIndex]bool)
	for i, c := range m.Chips {
		field := fmt.Sprintf("chips[%d]", i)
		switch {
		case !c.Index.Valid():
			return m.errorf(field+".index", "chip index %d is out of range: want 0, 1 or any", int(c.Index))
		case seen[c.Index] || seen[AnyChip] || (c.Index == AnyChip && len(seen) > 0):
			return m.errorf(field+".index", "chip %s is already given", c.Index)
		case c.Bitstream == "":
			return m.errorf(field+".bitstream", "missing")
		case !filepath.IsLocal(filepath.FromSlash(c.Bitstream)):
			return m.errorf(field+".bitstream", "%q is not a path inside the manifest's directory", c.Bitstream)
		case c.Role.Name == "":
			return m.errorf(field+".role.name", "missing")
		case c.Role.Version == "":
			return m.errorf(field+".role.version", "missing")
		}
		seen[c.Index] = true
	}
	return nil
}
