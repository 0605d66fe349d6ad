package deviceplugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// cdiVersion is the CDI spec version written: the oldest that has
// everything the specs use, so that older runtimes read them too.
const cdiVersion = "0.5.0"

type cdiSpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []cdiDevice `json:"devices"`
}

type cdiDevice struct {
	Name  string   `json:"name"`
	Edits cdiEdits `json:"containerEdits"`
}

type cdiEdits struct {
	Env []string `json:"env"`
}

// writeCDISpecs writes one CDI spec per resource naming its devices, so
// that a runtime resolving the names Allocate returns finds them. A CDI
// device must edit the container somehow; faasd's chips need no device
// node, so each sets a variable naming itself, FAAS_CDI_<ID>.
func (p *Plugin) writeCDISpecs() error {
	if err := os.MkdirAll(p.cfg.CDIDir, 0o755); err != nil {
		return err
	}
	for k := range numKinds {
		spec := cdiSpec{Version: cdiVersion, Kind: k.String()}
		for _, d := range p.inv.devices(k) {
			env := "FAAS_CDI_" + strings.ToUpper(strings.ReplaceAll(d.ID, "-", "_")) + "=" + d.ID
			spec.Devices = append(spec.Devices, cdiDevice{Name: d.ID, Edits: cdiEdits{Env: []string{env}}})
		}
		data, err := json.MarshalIndent(spec, "", "  ")
		if err != nil {
			return err
		}
		name := filepath.Join(p.cfg.CDIDir, strings.ReplaceAll(k.String(), "/", "-")+".json")
		tmp := name + ".tmp"
		if err := os.WriteFile(tmp, data, 0o644); err != nil {
			return fmt.Errorf("deviceplugin: CDI spec: %w", err)
		}
		if err := os.Rename(tmp, name); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("deviceplugin: CDI spec: %w", err)
		}
	}
	return nil
}
