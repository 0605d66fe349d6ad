package image

import (
	"fmt"
	"os"

	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// readHeader reads the .bit header of the bitstream file at path, which must
// be a regular file.
func readHeader(path string) (bitfile.Header, error) {
	f, err := os.Open(path)
	if err != nil {
		return bitfile.Header{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return bitfile.Header{}, err
	}
	if !fi.Mode().IsRegular() {
		return bitfile.Header{}, fmt.Errorf("%s is not a regular file", path)
	}
	return bitfile.ReadHeader(f)
}

// checkHeader checks the .bit header h of chip i of m against the role and
// the board, and returns the part it is for.
func (m *Manifest) checkHeader(i int, h bitfile.Header) (shell.Part, error) {
	c := m.Chips[i]
	field := fmt.Sprintf("chips[%d].bitstream", i)
	if name := h.DesignName(); name != c.Role.Name {
		return shell.Part{}, m.errorf(field, "design name %q in the .bit header is not the role name %q", name, c.Role.Name)
	}
	model, err := shell.ModelByName(m.Board)
	if err != nil {
		return shell.Part{}, m.errorf("board", "%w", err)
	}
	if !knownPart(h) {
		return shell.Part{}, m.errorf(field, "part %q in the .bit header is not a part of shell v%d", h.Part, shell.VersionMajor)
	}
	chips := []int{int(c.Index)}
	if c.Index == AnyChip {
		chips = []int{0, 1}
	}
	for _, chip := range chips {
		if p := model.Parts[chip]; !h.ForPart(p) {
			return shell.Part{}, m.errorf(field, "bitstream is for part %q, but chip %d of board %s is %s", h.Part, chip, model.Name, p.Name)
		}
	}
	return model.Parts[chips[0]], nil
}

// knownPart reports whether h is for a part of some board model.
func knownPart(h bitfile.Header) bool {
	for _, m := range shell.Models {
		for _, p := range m.Parts {
			if h.ForPart(p) {
				return true
			}
		}
	}
	return false
}
