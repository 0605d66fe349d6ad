package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestEngineSourceErrors: flags that cannot make engines are errors that
// name the flag, before anything is opened.
func TestEngineSourceErrors(t *testing.T) {
	t.Setenv("FAAS_CONFIG", filepath.Join(t.TempDir(), "none.json"))
	t.Setenv("FAAS_REGISTRY", "")
	t.Setenv("FAAS_TOKEN", "")
	t.Setenv(envSlots, "")
	for _, c := range []struct {
		src  engineSource
		want string
	}{
		{engineSource{slots: "0,x"}, `-slots "0,x": "x" is not a slot number`},
		{engineSource{slots: "-1"}, `"-1" is not a slot number`},
		{engineSource{attach: "acme/alidnn-dual", attachments: 1}, "-attach: no registry"},
		{engineSource{attach: "acme/alidnn-dual", attachments: 65, registry: "http://127.0.0.1:1"}, "-attachments 65: at most 64"},
	} {
		_, _, _, err := c.src.open()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.src, err, c.want)
		}
	}
	// The device plugin's slots and token stand in for -slots and the login.
	t.Setenv(envSlots, "2,3")
	_, openers, _, err := engineSource{slots: "0"}.open()
	if err != nil || len(openers) != 2 || !strings.Contains(openers[0].String(), "slot 2") || !strings.Contains(openers[1].String(), "slot 3") {
		t.Errorf("with %s=2,3: %v %v, want slots 2 and 3", envSlots, openers, err)
	}
	_, openers, _, err = engineSource{attach: "acme/alidnn-dual", attachments: 3, registry: "http://127.0.0.1:1"}.open()
	if err != nil || len(openers) != 3 {
		t.Errorf("-attach with -attachments 3: %d openers, %v", len(openers), err)
	}
}
