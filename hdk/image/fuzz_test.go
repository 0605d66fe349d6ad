package image

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadManifest checks that Parse never panics and that it either fails
// with a *ManifestError or returns a manifest whose chips have parts.
func FuzzLoadManifest(f *testing.F) {
	for _, s := range []string{
		oneChip,
		twoChips,
		strings.Replace(oneChip, "index: 0", "index: any", 1),
		strings.Replace(oneChip, "index: 0", "index: [0]", 1),
		oneChip + "both_chips: true\n",
		"name: [\n",
		"- a\n",
		"",
		"name: &a x\nversion: *a\n",
		"chips: {index: 0}\n",
		"chips:\n  - bitstream: /dev/zero\n",
		"chips:\n  - bitstream: .\n",
		"resources: {ddr_bytes: -1}\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	for name, b := range loopbackFiles(f) {
		if name == "image.yaml" {
			continue
		}
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "loopback.bit"), loopbackBit(f), 0o644); err != nil {
		f.Fatal(err)
	}
	file := filepath.Join(dir, "image.yaml")
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(file, data)
		if err != nil {
			var merr *ManifestError
			if !errors.As(err, &merr) {
				t.Fatalf("Parse: %v is not a *ManifestError", err)
			}
			return
		}
		if len(m.Chips) == 0 {
			t.Fatal("Parse returned a manifest without chips")
		}
		for i, c := range m.Chips {
			if c.Part == "" || !c.Index.Valid() {
				t.Fatalf("chips[%d] = %+v", i, c)
			}
		}
	})
}
