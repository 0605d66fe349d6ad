package image

import (
	"encoding"
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// schema is the part of a JSON Schema the test compares with the Go types.
type schema struct {
	Type       string             `json:"type"`
	Required   []string           `json:"required"`
	Properties map[string]*schema `json:"properties"`
	Items      *schema            `json:"items"`
}

// configSchema returns the JSON Schema of SPEC.md: the first JSON block
// after the heading "### JSON Schema".
func configSchema(t *testing.T) *schema {
	t.Helper()
	b, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n### JSON Schema\n")
	if !ok {
		t.Fatal("SPEC.md has no JSON Schema section")
	}
	_, rest, ok = strings.Cut(rest, "```json\n")
	block, _, ok2 := strings.Cut(rest, "\n```")
	if !ok || !ok2 {
		t.Fatal("SPEC.md's JSON Schema section has no json block")
	}
	var s schema
	if err := json.Unmarshal([]byte(block), &s); err != nil {
		t.Fatalf("SPEC.md's JSON Schema: %v", err)
	}
	return &s
}

// TestSpecSchema checks that the JSON Schema of SPEC.md and the Config type
// agree on the properties and required properties of every object.
func TestSpecSchema(t *testing.T) {
	compareSchema(t, "config", configSchema(t), reflect.TypeFor[Config]())
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func compareSchema(t *testing.T, path string, s *schema, typ reflect.Type) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if s == nil {
		t.Errorf("%s: no schema", path)
		return
	}
	switch {
	case typ.Implements(jsonMarshaler) || typ.Implements(textMarshaler):
		// Encoded as a scalar, e.g. ChipIndex, v1.Hash.
	case typ.Kind() == reflect.Slice:
		if s.Type != "array" {
			t.Errorf("%s: schema type %q, want array", path, s.Type)
		}
		compareSchema(t, path+"[]", s.Items, typ.Elem())
	case typ.Kind() == reflect.Struct:
		if s.Type != "object" {
			t.Errorf("%s: schema type %q, want object", path, s.Type)
		}
		var props, required []string
		for f := range typ.Fields() {
			name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Errorf("%s.%s: no JSON name", path, f.Name)
				continue
			}
			props = append(props, name)
			if !strings.Contains(opts, "omitempty") {
				required = append(required, name)
			}
			compareSchema(t, path+"."+name, s.Properties[name], f.Type)
		}
		var schemaProps []string
		for name := range s.Properties {
			schemaProps = append(schemaProps, name)
		}
		if slices.Sort(props); !slices.Equal(props, slices.Sorted(slices.Values(schemaProps))) {
			t.Errorf("%s: Go properties %v, schema properties %v", path, props, slices.Sorted(slices.Values(schemaProps)))
		}
		if slices.Sort(required); !slices.Equal(required, slices.Sorted(slices.Values(s.Required))) {
			t.Errorf("%s: Go required %v, schema required %v", path, required, slices.Sorted(slices.Values(s.Required)))
		}
	}
}

// TestSpecExampleConfig checks that the example config of SPEC.md parses.
func TestSpecExampleConfig(t *testing.T) {
	b, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(b), "\n## Config\n")
	_, rest, _ = strings.Cut(rest, "```json\n")
	block, _, _ := strings.Cut(rest, "\n```")
	// The example shortens its digest.
	block = strings.Replace(block, "sha256:ce0d…", "sha256:"+strings.Repeat("ce0d", 16), 1)
	c, err := ParseConfig([]byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "loopback" || len(c.Chips) != 1 || c.Chips[0].Clocks["kernel"] != 250 || c.Build == nil || c.Resources == nil {
		t.Errorf("config = %+v", c)
	}
}
