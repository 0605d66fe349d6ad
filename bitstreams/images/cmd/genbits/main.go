// Command genbits writes the reference images' sources into a build folder:
// for each image, its image.yaml and its simulated partial bitstreams, ready
// for `hdk build -f OUT/<image>/image.yaml`.
//
// Usage: go run ./bitstreams/images/cmd/genbits -o OUT [-small]
// Exit codes: 0 written; 1 failure; 2 bad usage.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/fpga-faas/faas/bitstreams/images"
)

func main() {
	out := flag.String("o", "", "folder to write <image>/image.yaml and bitstreams into")
	small := flag.Bool("small", false, "1 MiB of frames per bitstream instead of 38 MiB")
	flag.Parse()
	if *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: genbits -o OUT [-small]")
		os.Exit(2)
	}
	frames := images.FrameBytes
	if *small {
		frames = images.SmallFrameBytes
	}
	if err := write(*out, frames); err != nil {
		fmt.Fprintln(os.Stderr, "genbits:", err)
		os.Exit(1)
	}
}

func write(out string, frames int) error {
	for _, src := range images.Sources {
		dir := filepath.Join(out, src.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		m, err := images.Manifest(src.Name)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "image.yaml"), m, 0o644); err != nil {
			return err
		}
		for _, b := range src.Bitstreams {
			bit, err := b.Make(b.Part, frames)
			if err != nil {
				return fmt.Errorf("%s/%s: %w", src.Name, b.File, err)
			}
			if err := os.WriteFile(filepath.Join(dir, b.File), bit, 0o644); err != nil {
				return err
			}
			fmt.Printf("%s/%s: %d bytes for %s\n", src.Name, b.File, len(bit), b.Part.Name)
		}
	}
	return nil
}
