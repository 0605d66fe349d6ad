package validate

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/seal"
	"github.com/fpga-faas/faas/shell"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chips string
		both  bool
	}{
		{"one chip", oneChip, false},
		{"two chips sharing a bitstream", twoChips, true},
		{"any chip", "  - {index: any, bitstream: loopback.bit, role: {name: loopback, version: \"1.0\"}}\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			img := build(t, tc.chips, tc.both)
			for _, full := range []bool{false, true} {
				r := Image(context.Background(), img, Options{FullStream: full})
				if len(r.Findings) != 0 || !r.OK() || r.Err() != nil {
					t.Errorf("FullStream %t: findings %v, err %v", full, r.Findings, r.Err())
				}
			}
		})
	}
}

func TestValidSealed(t *testing.T) {
	f := newFixture(t, build(t, oneChip, false))
	f.setLayer(t, 0, 0, sealed(t), image.SealedBitstreamMediaType)
	f.chip(0)["sealed"] = true
	if r := Image(context.Background(), f.image(t), Options{FullStream: true}); len(r.Findings) != 0 {
		t.Errorf("findings %v", r.Findings)
	}
}

// sealed returns the loopback bitstream, sealed.
func sealed(t testing.TB) []byte {
	t.Helper()
	bit, err := loopback.Bitstream(shell.PartVU9P, 4096)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := seal.Seal(&b, bytes.NewReader(bit), seal.NewDataKey(), seal.Options{ChunkSize: seal.MinChunkSize}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// cases corrupt a valid image in one way each, and say what must be found.
var cases = []struct {
	name  string
	two   bool // start from the two-chip image rather than the one-chip one
	opts  Options
	ctx   func() context.Context
	mut   func(t testing.TB, f *fixture)
	code  Code
	field string
	chip  int
}{
	{name: "docker manifest", code: ManifestInvalid, field: "mediaType", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.MediaType = types.DockerManifestSchema2 }},
	{name: "schema version", code: ManifestInvalid, field: "schemaVersion", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.SchemaVersion = 1 }},
	{name: "artifact type", code: ArtifactTypeInvalid, field: "artifactType", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.ArtifactType = "application/vnd.example" }},
	{name: "no artifact type", code: ArtifactTypeInvalid, field: "artifactType", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.ArtifactType = "" }},
	{name: "config media type", code: ConfigInvalid, field: "config.mediaType", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.Config.MediaType = types.OCIConfigJSON }},
	{name: "config syntax", code: ConfigInvalid, chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.rawCfg = []byte(`{"name":`) }},
	{name: "config not an object", code: ConfigInvalid, chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.rawCfg = []byte(`null`) }},
	{name: "config type", code: ConfigInvalid, field: "chips[0].part", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["part"] = 5 }},
	{name: "config too large", code: ConfigTooLarge, field: "config.size", chip: -1, opts: Options{MaxConfigBytes: 100}},
	{name: "config digest", code: ConfigDigestMismatch, field: "config.digest", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.keepConfigDesc = true; f.cfg["description"] = "changed" }},
	{name: "layer too large", code: LayerTooLarge, field: "layers[0].size", chip: -1, opts: Options{MaxLayerBytes: 1000}},
	{name: "too many layers", two: true, code: TooManyLayers, field: "layers", chip: -1, opts: Options{MaxLayers: 1}},
	{name: "vendor missing", code: FieldMissing, field: "vendor", chip: -1,
		mut: func(_ testing.TB, f *fixture) { delete(f.cfg, "vendor") }},
	{name: "name empty", code: FieldMissing, field: "name", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["name"] = "" }},
	{name: "sealed missing", code: FieldMissing, field: "chips[0].sealed", chip: 0,
		mut: func(_ testing.TB, f *fixture) { delete(f.chip(0), "sealed") }},
	{name: "role version empty", code: FieldMissing, field: "chips[0].role.version", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["role"].(map[string]any)["version"] = "" }},
	{name: "interface uuid missing", code: FieldMissing, field: "shell.interface_uuid", chip: -1,
		mut: func(_ testing.TB, f *fixture) { delete(f.cfg["shell"].(map[string]any), "interface_uuid") }},
	{name: "no chips", code: FieldMissing, field: "chips", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["chips"] = []any{}; f.mf.Layers = nil }},
	{name: "clock", code: FieldInvalid, field: "chips[0].clocks.kernel", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["clocks"] = map[string]any{"kernel": 0} }},
	{name: "uuid form", code: FieldInvalid, field: "shell.interface_uuid", chip: -1,
		mut: func(_ testing.TB, f *fixture) {
			f.cfg["shell"].(map[string]any)["interface_uuid"] = "6F1E3C52-8A47-4E0B-9D21-F4A8510C7E33"
		}},
	{name: "build date", code: FieldInvalid, field: "build.date", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["build"].(map[string]any)["date"] = "yesterday" }},
	{name: "layer digest form", code: FieldInvalid, field: "chips[0].layer", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["layer"] = "sha256:abc"; f.mf.Layers = nil }},
	{name: "power", code: FieldInvalid, field: "resources.power_w", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["resources"].(map[string]any)["power_w"] = -1 }},
	{name: "unknown member", code: FieldUnknown, field: "chips[0].clock", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["clock"] = 1 }},
	{name: "shell name", code: ShellUnknown, field: "shell.name", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["shell"].(map[string]any)["name"] = "aws-shell" }},
	{name: "shell versions syntax", code: ShellVersionInvalid, field: "shell.versions", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["shell"].(map[string]any)["versions"] = "~1.0" }},
	{name: "shell versions exclude 1.0", code: ShellVersionInvalid, field: "shell.versions", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["shell"].(map[string]any)["versions"] = ">=1.1,<2" }},
	{name: "shell interface", code: ShellInterfaceMismatch, field: "shell.interface_uuid", chip: -1,
		mut: func(_ testing.TB, f *fixture) {
			f.cfg["shell"].(map[string]any)["interface_uuid"] = "00000000-0000-0000-0000-000000000000"
		}},
	{name: "board", code: BoardUnknown, field: "board", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["board"] = "faas-vu13p-quad" }},
	{name: "chip index 2", code: ChipIndexInvalid, field: "chips[0].index", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["index"] = 2 }},
	{name: "chip index string", code: ChipIndexInvalid, field: "chips[0].index", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["index"] = "0" }},
	{name: "chip index twice", two: true, code: ChipIndexInvalid, field: "chips[1].index", chip: 1,
		mut: func(_ testing.TB, f *fixture) { f.chip(1)["index"] = 0 }},
	{name: "chip any not alone", two: true, code: ChipIndexInvalid, field: "chips[1].index", chip: 1,
		mut: func(_ testing.TB, f *fixture) { f.chip(1)["index"] = "any" }},
	{name: "part of another board", code: PartMismatch, field: "chips[0].part", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.cfg["board"] = shell.ModelKU15PDual.Name }},
	{name: "part unknown", code: PartMismatch, field: "chips[0].part", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["part"] = "xc7a35tcpg236-1" }},
	{name: "both chips", code: BothChipsIncomplete, field: "both_chips_required", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.cfg["both_chips_required"] = true }},
	{name: "role unknown", code: RoleUnknown, field: "chips[0].role.name", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.chip(0)["role"] = map[string]any{"name": "nope", "version": "1.0"}
			f.setLayer(t, 0, 0, bit(t, "nope;PARTIAL=TRUE", shell.PartVU9P, shell.PartVU9P), image.BitstreamMediaType)
		}},
	{name: "role version", code: RoleVersionIncompatible, field: "chips[0].role.version", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["role"].(map[string]any)["version"] = "1.1" }},
	{name: "role version form", code: RoleVersionIncompatible, field: "chips[0].role.version", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["role"].(map[string]any)["version"] = "1" }},
	{name: "layer not in manifest", code: LayerMissing, field: "chips[0].layer", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.mf.Layers = nil }},
	{name: "shared layer listed once", two: true, code: LayerMissing, field: "chips[1].layer", chip: 1,
		mut: func(_ testing.TB, f *fixture) { f.mf.Layers = f.mf.Layers[:1] }},
	{name: "extra layer", code: LayerUnexpected, field: "layers[1]", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.Layers = append(f.mf.Layers, f.mf.Layers[0]) }},
	{name: "layer media type", code: LayerMediaTypeInvalid, field: "layers[0].mediaType", chip: -1,
		mut: func(_ testing.TB, f *fixture) { f.mf.Layers[0].MediaType = "application/octet-stream" }},
	{name: "sealed flag", code: LayerMediaTypeInvalid, field: "chips[0].sealed", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.chip(0)["sealed"] = true }},
	{name: "layer bytes", code: LayerDigestMismatch, field: "layers[0].digest", chip: 0,
		mut: func(_ testing.TB, f *fixture) {
			b := f.blobs[f.mf.Layers[0].Digest]
			b[len(b)/2] ^= 1
		}},
	{name: "layer size", code: LayerDigestMismatch, field: "layers[0].size", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.mf.Layers[0].Size-- }},
	{name: "header", code: BitstreamHeaderInvalid, field: "layers[0]", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, []byte("not a bitstream"), image.BitstreamMediaType)
		}},
	{name: "header part", code: BitstreamPartMismatch, field: "chips[0].part", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, bit(t, "loopback;PARTIAL=TRUE", shell.PartKU15P, shell.PartKU15P), image.BitstreamMediaType)
		}},
	{name: "design name", code: RoleMismatch, field: "chips[0].role.name", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, bit(t, "other;PARTIAL=TRUE", shell.PartVU9P, shell.PartVU9P), image.BitstreamMediaType)
		}},
	{name: "not partial", code: BitstreamNotPartial, field: "layers[0]", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, bit(t, "loopback;UserID=0XFFFFFFFF", shell.PartVU9P, shell.PartVU9P), image.BitstreamMediaType)
		}},
	{name: "stream", code: BitstreamInvalid, field: "layers[0]", chip: 0, opts: Options{FullStream: true},
		mut: func(t testing.TB, f *fixture) {
			b := bytes.Clone(f.blobs[f.mf.Layers[0].Digest])
			b[len(b)-frameBytes/2] ^= 1 // a frame byte: the CRC check fails
			f.setLayer(t, 0, 0, b, image.BitstreamMediaType)
		}},
	{name: "idcode", code: BitstreamInvalid, field: "chips[0].layer", chip: 0, opts: Options{FullStream: true},
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, bit(t, "loopback;PARTIAL=TRUE", shell.PartVU9P, shell.PartKU15P), image.BitstreamMediaType)
		}},
	{name: "seal header", code: SealHeaderInvalid, field: "layers[0]", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			b := sealed(t)
			b[0] ^= 1 // the magic
			f.setLayer(t, 0, 0, b, image.SealedBitstreamMediaType)
			f.chip(0)["sealed"] = true
		}},
	{name: "seal size", code: SealHeaderInvalid, field: "layers[0]", chip: 0,
		mut: func(t testing.TB, f *fixture) {
			f.setLayer(t, 0, 0, append(sealed(t), 0), image.SealedBitstreamMediaType)
			f.chip(0)["sealed"] = true
		}},
	{name: "layer unreadable", code: ReadFailed, field: "layers[0]", chip: 0,
		mut: func(_ testing.TB, f *fixture) { f.layerErr = errors.New("connection reset") }},
	{name: "cancelled", code: ReadFailed, field: "layers", chip: -1,
		ctx: func() context.Context {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx
		}},
}

func TestFindings(t *testing.T) {
	one, two := build(t, oneChip, false), build(t, twoChips, true)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := one
			if tc.two {
				base = two
			}
			f := newFixture(t, base)
			if tc.mut != nil {
				tc.mut(t, f)
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx()
			}
			r := Image(ctx, f.image(t), tc.opts)
			if len(r.Findings) != 1 {
				t.Fatalf("want one finding %s, got %d:\n%s", tc.code, len(r.Findings), list(r))
			}
			got := r.Findings[0]
			if got.Code != tc.code || got.Field != tc.field || got.Chip != tc.chip {
				t.Errorf("got %s (chip %d), want %s at %q (chip %d)", got, got.Chip, tc.code, tc.field, tc.chip)
			}
			if got.Message == "" || got.Severity != severity(tc.code) {
				t.Errorf("finding %+v: no message or wrong severity", got)
			}
			err := r.Err()
			if want := got.Severity == SeverityError; r.OK() == want || (err != nil) != want {
				t.Errorf("OK() = %t, Err() = %v for a finding of severity %s", r.OK(), err, got.Severity)
			}
			if err != nil && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), string(tc.code))) {
				t.Errorf("Err() = %v, want ErrInvalid naming %s", err, tc.code)
			}
		})
	}
}

func list(r Report) string {
	var b strings.Builder
	for _, f := range r.Findings {
		b.WriteString("\t" + f.String() + "\n")
	}
	return b.String()
}

// TestEveryCodeTested keeps a case for every code.
func TestEveryCodeTested(t *testing.T) {
	tested := make(map[Code]bool)
	for _, tc := range cases {
		tested[tc.code] = true
	}
	for _, ci := range Codes() {
		if !tested[ci.Code] {
			t.Errorf("no test case for %s", ci.Code)
		}
	}
}

// TestFindingsTogether checks that findings are collected, not fail-fast.
func TestFindingsTogether(t *testing.T) {
	f := newFixture(t, build(t, oneChip, false))
	f.cfg["board"] = "nope"
	delete(f.cfg, "vendor")
	f.chip(0)["role"].(map[string]any)["version"] = "9.0"
	f.mf.Layers = append(f.mf.Layers, f.mf.Layers[0])
	r := Image(context.Background(), f.image(t), Options{})
	for _, c := range []Code{BoardUnknown, FieldMissing, RoleVersionIncompatible, LayerUnexpected} {
		if !r.Has(c) {
			t.Errorf("no %s in\n%s", c, list(r))
		}
	}
	if len(r.Findings) != 4 {
		t.Errorf("want 4 findings, got\n%s", list(r))
	}
}

func TestVersionRange(t *testing.T) {
	v10 := version{1, 0}
	for _, tc := range []struct {
		in   string
		ok   bool // parses
		want bool // contains 1.0
	}{
		{">=1.0,<2", true, true},
		{" >= 1.0 , < 2 ", true, true},
		{"=1.0", true, true},
		{"=1", true, true},
		{"<=1", true, true},
		{">1", true, false},
		{">=1.1", true, false},
		{"<1.0", true, false},
		{">=2,<1", true, false},
		{">0.9", true, true},
		{"", false, false},
		{"1.0", false, false},
		{">=1.0,", false, false},
		{">=1.0.0", false, false},
		{">=+1", false, false},
		{">=1.x", false, false},
		{">=65536", false, false},
		{"=>1", false, false},
	} {
		r, err := parseRange(tc.in)
		if (err == nil) != tc.ok {
			t.Errorf("parseRange(%q): err %v, want ok %t", tc.in, err, tc.ok)
			continue
		}
		if err == nil && r.contains(v10) != tc.want {
			t.Errorf("%q contains 1.0 = %t, want %t", tc.in, !tc.want, tc.want)
		}
	}
}
