package modelartifact

import (
	"errors"
	"strings"
	"testing"
)

func TestParseManifest(t *testing.T) {
	_, good, err := NewManifest([]byte(`{"name":"mnist"}`), []byte("model bytes"), true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseManifest(good, Limits{})
	if err != nil || !m.IsONNX() || m.Model().Size != int64(len("model bytes")) {
		t.Fatalf("ParseManifest(NewManifest): %+v, %v", m, err)
	}
	s := string(good)
	for _, c := range []struct{ name, manifest, want string }{
		{"schema", strings.Replace(s, `"schemaVersion":2`, `"schemaVersion":1`, 1), "schemaVersion"},
		{"artifact type", strings.Replace(s, ArtifactType, "application/vnd.other", 1), "artifactType"},
		{"config type", strings.Replace(s, ConfigMediaType, "application/json", 1), "config mediaType"},
		{"layer type", strings.Replace(s, ONNXMediaType, "application/octet-stream", 1), "layer mediaType"},
		{"digest", strings.Replace(s, `"digest":"sha256:`, `"digest":"sha512:`, 1), "digest"},
		{"two layers", strings.Replace(s, `"layers":[`, `"layers":[{"mediaType":"`+ONNXMediaType+`","digest":"sha256:`+strings.Repeat("a", 64)+`","size":1},`, 1), "2 layers"},
		{"trailing", s + "{}", "after the JSON"},
		{"not json", "{", "manifest"},
	} {
		if _, err := ParseManifest([]byte(c.manifest), Limits{}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid naming %q", c.name, err, c.want)
		}
	}
	if _, err := ParseManifest(good, Limits{MaxModelBytes: 3}); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "model layer size") {
		t.Errorf("over MaxModelBytes: %v", err)
	}
	if _, err := ParseManifest(good, Limits{MaxManifestBytes: 10}); !errors.Is(err, ErrInvalid) {
		t.Errorf("over MaxManifestBytes: %v", err)
	}
}

func TestVerify(t *testing.T) {
	b := []byte("abc")
	d := Descriptor{Digest: Digest(b), Size: 3}
	if err := Verify("x", d, b); err != nil {
		t.Fatal(err)
	}
	if err := Verify("x", d, []byte("abd")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a changed byte: %v", err)
	}
	if err := Verify("x", d, []byte("abcd")); !errors.Is(err, ErrInvalid) {
		t.Errorf("a longer blob: %v", err)
	}
}

func TestParseRef(t *testing.T) {
	for _, ok := range []string{"127.0.0.1:5000/acme/mnist:1", "reg.example.com/acme/mnist@sha256:" + strings.Repeat("0", 64), "localhost/a/b:v"} {
		if _, err := ParseRef(ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"acme/mnist:1", "mnist", "reg.example.com/acme/mnist@sha256:00", "reg.example.com/Acme/mnist:1", ""} {
		if _, err := ParseRef(bad); !errors.Is(err, ErrRef) {
			t.Errorf("%q: %v, want ErrRef", bad, err)
		}
	}
}

// FuzzParseManifest: whatever the registry sends, ParseManifest returns a
// manifest that passes its own checks or an ErrInvalid, never a panic.
func FuzzParseManifest(f *testing.F) {
	_, good, _ := NewManifest([]byte(`{}`), []byte("m"), false)
	f.Add(good)
	f.Add([]byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"schemaVersion":2,"layers":[{"size":-1}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseManifest(b, Limits{})
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if len(m.Layers) != 1 || !ValidDigest(m.Config.Digest) || !ValidDigest(m.Model().Digest) || m.Model().Size <= 0 {
			t.Fatalf("accepted %+v", m)
		}
	})
}
