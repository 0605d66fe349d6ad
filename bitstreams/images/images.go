// Package images holds the sources of the platform's reference images: for
// each, an image.yaml (in a folder named after the image) and the recipe of its
// simulated partial bitstreams. `make images` writes the bitstreams next to a
// copy of each image.yaml (cmd/genbits) and builds the images with hdk.
//
// The bitstreams are simulated: real .bit headers naming the role and the
// part, a configuration stream the shell's PR controller checks, and a
// deterministic payload of realistic size (about 38 MiB per chip for a
// VU9P-class part).
package images

import (
	"embed"
	"fmt"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/shell"
)

// FrameBytes is the size of the configuration frames of a full-size
// simulated bitstream: about what a VU9P-class reconfigurable region takes.
const FrameBytes = 38 << 20

// SmallFrameBytes is used by tests and `make images SMALL=1`.
const SmallFrameBytes = 1 << 20

// Bitstream is one simulated bitstream of an image.
type Bitstream struct {
	File string // as named in the image's image.yaml
	Part shell.Part
	// Make generates the bitstream with frameBytes of frames.
	Make func(part shell.Part, frameBytes int) ([]byte, error)
}

// Source is a reference image.
type Source struct {
	Name       string // folder holding image.yaml
	Bitstreams []Bitstream
}

// Sources lists the reference images.
var Sources = []Source{
	{Name: "loopback", Bitstreams: []Bitstream{{File: "loopback.bit", Part: shell.PartVU9P, Make: loopback.Bitstream}}},
	{Name: "alidnn", Bitstreams: []Bitstream{{File: "alidnn.bit", Part: shell.PartVU9P, Make: alidnn.Bitstream}}},
	{Name: "alidnn-dual", Bitstreams: []Bitstream{
		{File: "alidnn-0.bit", Part: shell.PartVU9P, Make: alidnn.Bitstream},
		{File: "alidnn-1.bit", Part: shell.PartVU9P, Make: alidnn.Bitstream},
	}},
}

//go:embed */image.yaml
var manifests embed.FS

// Manifest returns the image.yaml of source name.
func Manifest(name string) ([]byte, error) {
	b, err := manifests.ReadFile(name + "/image.yaml")
	if err != nil {
		return nil, fmt.Errorf("images: no reference image %q: %w", name, err)
	}
	return b, nil
}
