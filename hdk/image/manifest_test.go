package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// oneChip is an image.yaml for the loopback role on chip 0; tests replace
// its lines.
const oneChip = `name: loopback
version: 1.0.0
vendor: Example Inc.
board: faas-vu9p-dual
chips:
  - index: 0
    bitstream: loopback.bit
    role:
      name: loopback
      version: "1.0"
`

func TestLoad(t *testing.T) {
	path := writeDir(t, map[string][]byte{"image.yaml": []byte(oneChip), "loopback.bit": loopbackBit(t)})
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.File != path || m.Name != "loopback" || m.Board != "faas-vu9p-dual" || len(m.Chips) != 1 ||
		m.Chips[0].Part != shell.PartVU9P.Name || m.Chips[0].Role != (Role{Name: "loopback", Version: "1.0"}) {
		t.Errorf("manifest = %+v", m)
	}
	img, err := Build(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ConfigOf(img)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Shell.Versions != DefaultShellVersions || DefaultShellVersions != fmt.Sprintf(">=%d.0,<%d", shell.VersionMajor, shell.VersionMajor+1) {
		t.Errorf("shell.versions = %q, want the default %q", cfg.Shell.Versions, DefaultShellVersions)
	}
}

func TestLoadAnyChip(t *testing.T) {
	yaml := strings.Replace(oneChip, "index: 0", "index: any", 1)
	m, err := Load(writeDir(t, map[string][]byte{"image.yaml": []byte(yaml), "loopback.bit": loopbackBit(t)}))
	if err != nil {
		t.Fatal(err)
	}
	if m.Chips[0].Index != AnyChip || m.Chips[0].Part != shell.PartVU9P.Name {
		t.Errorf("chips[0] = %+v", m.Chips[0])
	}
}

// bit returns a partial bitstream with the given design name for part.
func bit(t *testing.T, design string, part shell.Part) []byte {
	t.Helper()
	h := loopback.Header(part)
	h.Design = design + ";PARTIAL=TRUE"
	b, err := bitfile.Build(h, part, make([]byte, 1024))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLoadErrors(t *testing.T) {
	artix := shell.Part{Name: "xc7a35tcpg236-1", IDCode: 0x0362d093, ConfigRate: 100_000_000, SLRs: 1}
	for _, tc := range []struct {
		name string
		yaml string                  // oneChip if empty
		old  string                  // replaced in yaml by new
		new  string                  //
		bit  func(*testing.T) []byte // loopbackBit if nil; no file if returns nil
		want string                  // in the error, after the file name
	}{
		{name: "missing bitstream", bit: func(*testing.T) []byte { return nil },
			want: ":7: chips[0].bitstream: open "},
		{name: "yaml syntax", old: "vendor: Example Inc.\n", new: "vendor: Example Inc.\n  tools: vivado\n",
			want: ":4: mapping values are not allowed in this context"},
		{name: "unknown board", old: "faas-vu9p-dual", new: "faas-zu19eg-dual",
			want: `:4: board: shell: unknown board model "faas-zu19eg-dual"`},
		{name: "chip index out of range", old: "index: 0", new: "index: 2",
			want: `:6: chips[0].index: "2" is out of range: want 0, 1 or any`},
		{name: "design name", bit: func(t *testing.T) []byte { return bit(t, "other", shell.PartVU9P) },
			want: `:7: chips[0].bitstream: design name "other" in the .bit header is not the role name "loopback"`},
		{name: "part of another board", bit: func(t *testing.T) []byte { return bit(t, "loopback", shell.PartKU15P) },
			want: `:7: chips[0].bitstream: bitstream is for part "xcku15p-ffve1517-2-e", but chip 0 of board faas-vu9p-dual is xcvu9p-flgb2104-2-i`},
		{name: "part unknown to the shell", bit: func(t *testing.T) []byte { return bit(t, "loopback", artix) },
			want: `:7: chips[0].bitstream: part "xc7a35tcpg236-1" in the .bit header is not a part of shell v1`},
		{name: "not a bit file", bit: func(*testing.T) []byte { return []byte("hello") },
			want: ":7: chips[0].bitstream: bitfile: "},
		{name: "missing name", old: "name: loopback\n", new: "",
			want: ": name: missing"},
		{name: "missing role version", old: "      version: \"1.0\"\n", new: "",
			want: ":8: chips[0].role.version: missing"},
		{name: "unknown field", old: "vendor:", new: "vendr:",
			want: `:3: vendr: unknown field`},
		{name: "unknown field in flow style", old: "board: faas-vu9p-dual\n", new: "board: faas-vu9p-dual\nresources: {ddr_bytes: 1, power: 2}\n",
			want: `:5: resources.power: unknown field`},
		{name: "wrong type in flow style", old: "board: faas-vu9p-dual\n", new: "board: faas-vu9p-dual\nresources: {ddr_bytes: 1, power_w: x}\n",
			want: `:5: cannot unmarshal !!str`},
		{name: "wrong type", old: "board: faas-vu9p-dual\n", new: "board: faas-vu9p-dual\nboth_chips: maybe\n",
			want: `:5: both_chips: cannot unmarshal !!str`},
		{name: "bitstream outside the directory", old: "bitstream: loopback.bit", new: "bitstream: ../loopback.bit",
			want: `:7: chips[0].bitstream: "../loopback.bit" is not a path inside the manifest's directory`},
		{name: "both chips with one chip", yaml: oneChip + "both_chips: true\n",
			want: ":11: both_chips: set, but the image has 1 chip"},
		{name: "duplicate chip", yaml: oneChip + "  - {index: 0, bitstream: loopback.bit, role: {name: loopback, version: '1.0'}}\n",
			want: ":11: chips[1].index: chip 0 is already given"},
		{name: "no chips", yaml: strings.Split(oneChip, "chips:")[0],
			want: ": chips: missing"},
		{name: "not a mapping", yaml: "- a\n- b\n",
			want: ":1: manifest is not a mapping"},
		{name: "empty", yaml: "\n",
			want: ": empty manifest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := tc.yaml
			if yaml == "" {
				yaml = oneChip
			}
			if tc.old != "" {
				if !strings.Contains(yaml, tc.old) {
					t.Fatalf("manifest lacks %q", tc.old)
				}
				yaml = strings.Replace(yaml, tc.old, tc.new, 1)
			}
			files := map[string][]byte{"image.yaml": []byte(yaml)}
			b := loopbackBit(t)
			if tc.bit != nil {
				b = tc.bit(t)
			}
			if b != nil {
				files["loopback.bit"] = b
			}
			path := writeDir(t, files)
			_, err := Load(path)
			var merr *ManifestError
			if !errors.As(err, &merr) {
				t.Fatalf("Load: %v, want a *ManifestError", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, path) || !strings.Contains(msg, tc.want) {
				t.Errorf("Load: %v\nwant %s…%s…", err, path, tc.want)
			}
		})
	}
}

func TestManifestErrorUnwraps(t *testing.T) {
	path := writeDir(t, map[string][]byte{"image.yaml": []byte(oneChip)})
	_, err := Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load without the bitstream: %v, want fs.ErrNotExist", err)
	}
	var merr *ManifestError
	if !errors.As(err, &merr) || merr.File != path || merr.Line != 7 || merr.Field != "chips[0].bitstream" {
		t.Errorf("error = %#v", merr)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "image.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load of a missing manifest: %v", err)
	}
}

// TestBuildChecksBitstreams checks that Build reads the bitstreams again
// rather than trusting a Manifest checked earlier.
func TestBuildChecksBitstreams(t *testing.T) {
	path := writeDir(t, map[string][]byte{"image.yaml": []byte(oneChip), "loopback.bit": loopbackBit(t)})
	m, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	m.Chips[0].Role.Name = "alidnn"
	if _, err := Build(context.Background(), m); err == nil || !strings.Contains(err.Error(), `not the role name "alidnn"`) {
		t.Errorf("Build with another role: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, m); !errors.Is(err, context.Canceled) {
		t.Errorf("Build with a cancelled context: %v", err)
	}
}

func TestBuildChecksManifest(t *testing.T) {
	_, err := Build(context.Background(), Manifest{Version: "1"})
	var merr *ManifestError
	if !errors.As(err, &merr) || err.Error() != "image: manifest: name: missing" {
		t.Errorf("Build of an empty manifest: %v", err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"chips":[{"index":2}]}`, `chip index 2 (want 0, 1 or "any")`},
		{`{"chips":[{"layer":"md5:zz"}]}`, `chips.layer of type v1.Hash`},
		{`{"name":1}`, `Config.name of type string`},
		{`{"name":"a"} {}`, `data after the JSON object`},
		{`{"name":"a","version":"1","vendor":"v","shell":{"name":"s"},"board":"b"}`, `chips: missing`},
		{`{"name":"a","version":"1","vendor":"v","shell":{"name":"s"},"board":"b","chips":[{"part":"p","role":{"name":"r"}}]}`, `chips[0].layer: missing`},
		{`{"version":"1"}`, `name: missing`},
	} {
		if _, err := ParseConfig([]byte(tc.json)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%s): %v, want %q", tc.json, err, tc.want)
		}
	}
}
