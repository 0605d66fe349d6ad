package validate

import (
	"context"
	"testing"

	"github.com/fpga-faas/faas/hdk/image"
)

// FuzzConfig puts arbitrary config bytes in an otherwise valid image:
// checking must never panic, and a config it accepts must be one that
// image.ParseConfig accepts too.
func FuzzConfig(f *testing.F) {
	fx := newFixture(f, build(f, twoChips, true))
	valid := fx.image(f)
	raw, err := valid.RawConfigFile()
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(raw),
		`{}`, `null`, `[]`, `"x"`, `{"chips":[null]}`, `{"chips":null,"shell":null}`,
		`{"chips":[{"index":"any"},{"index":1}],"both_chips_required":true}`,
		`{"chips":[{"index":0,"role":{"name":"loopback","version":"65536.0"},"clocks":{"k":-1}}]}`,
		`{"shell":{"versions":">=1.0,<2,","interface_uuid":"6f1e3c52-8a47-4e0b-9d21-f4a8510c7e33"},"board":"faas-vu9p-dual"}`,
		`{"resources":{"ddr_bytes":-1},"build":{"date":"x"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fx.rawCfg = b
		r := Image(context.Background(), fx.image(t), Options{})
		if r.OK() {
			if _, err := image.ParseConfig(b); err != nil {
				t.Errorf("config accepted, but image.ParseConfig says %v", err)
			}
		}
	})
}
