package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/fpga-faas/faas/bitstreams/loopback"
	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/publish"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/bitfile"
)

// target is an image named on the command line: a layout directory or a
// registry reference.
type target struct {
	dir string         // layout directory, or ""
	ref name.Reference // registry reference, or nil
}

func parseTarget(arg string) (target, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		return target{dir: arg}, nil
	}
	ref, err := name.ParseReference(arg)
	if err != nil {
		return target{}, fmt.Errorf("%q is neither a layout directory nor an image reference: %w", arg, err)
	}
	return target{ref: ref}, nil
}

func remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

func (t target) image(ctx context.Context) (v1.Image, error) {
	if t.dir != "" {
		return image.ReadLayout(t.dir)
	}
	return image.Pull(ctx, t.ref.String(), remoteOptions(ctx)...)
}

// digest names the image by digest for signing: in a registry its
// repository, in a layout a repository named after the image.
func (t target) digest(ctx context.Context, img v1.Image) (name.Digest, []sign.Option, error) {
	h, err := img.Digest()
	if err != nil {
		return name.Digest{}, nil, err
	}
	if t.dir != "" {
		cfg, err := image.ConfigOf(img)
		if err != nil {
			return name.Digest{}, nil, err
		}
		d, err := name.NewDigest("layout.local/" + cfg.Name + "@" + h.String())
		if err != nil {
			return name.Digest{}, nil, err
		}
		return d, []sign.Option{sign.WithLayout(layout.Path(t.dir))}, nil
	}
	d, err := name.NewDigest(t.ref.Context().Name() + "@" + h.String())
	return d, []sign.Option{sign.WithRemoteOptions(remoteOptions(ctx)...)}, err
}

func initCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "init DIR",
		Short: "Scaffold DIR/image.yaml with a small loopback bitstream, ready for hdk build",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			model := shell.ModelVU9PDual
			bit, err := loopback.Bitstream(model.Parts[0], 1<<20)
			if err != nil {
				return err
			}
			manifest := fmt.Sprintf(`# Accelerator image: see hdk/image/SPEC.md for every field.
name: loopback
version: 1.0.0
vendor: Example Inc.
description: DMA loopback and checksum (bring-up role)
license: Apache-2.0
board: %s
chips:
  - index: 0
    bitstream: loopback.bit
    role: {name: %s, version: "%d.%d"}
both_chips: false
`, model.Name, loopback.Name, loopback.Version>>16, loopback.Version&0xffff)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			for file, data := range map[string][]byte{"image.yaml": []byte(manifest), "loopback.bit": bit} {
				if err := writeNew(filepath.Join(dir, file), data, 0o644); err != nil {
					return err
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s and %s\nnext: hdk build -f %s -o LAYOUT\n",
				filepath.Join(dir, "image.yaml"), filepath.Join(dir, "loopback.bit"), filepath.Join(dir, "image.yaml"))
			return nil
		},
	}
}

func buildCommand() *cobra.Command {
	var file, out, tag string
	cmd := &cobra.Command{
		Use:   "build -f DIR/image.yaml -o LAYOUT",
		Short: "Build an accelerator image from image.yaml into an OCI image layout",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			m, err := image.Load(file)
			if err != nil {
				return err
			}
			img, err := image.Build(cmd.Context(), m)
			if err != nil {
				return err
			}
			if tag == "" {
				tag = m.Version
			}
			if err := image.WriteLayout(out, img, tag); err != nil {
				return err
			}
			return printSummary(cmd, img, "built "+out+":"+tag)
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "image.yaml", "the image's image.yaml")
	cmd.Flags().StringVarP(&out, "output", "o", "", "OCI image layout directory to write")
	cmd.Flags().StringVar(&tag, "tag", "", "name of the image in the layout (default: its version)")
	cmd.MarkFlagRequired("output")
	return cmd
}

func printSummary(cmd *cobra.Command, img v1.Image, heading string) error {
	s, err := image.Inspect(img)
	if err != nil {
		return err
	}
	if jsonOutput(cmd) {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(s)
	}
	if heading != "" {
		fmt.Fprintln(cmd.OutOrStdout(), heading)
	}
	fmt.Fprint(cmd.OutOrStdout(), s.String())
	return nil
}

func inspectCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "inspect DIR|REF",
		Short: "Describe an image: name, vendor, board, chips with part, role and layer",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := parseTarget(args[0])
			if err != nil {
				return err
			}
			img, err := t.image(cmd.Context())
			if err != nil {
				return err
			}
			return printSummary(cmd, img, "")
		},
	}
}

func bitCommand() *cobra.Command {
	bit := &cobra.Command{Use: "bit", Short: "Work with Xilinx .bit files"}
	bit.AddCommand(&cobra.Command{
		Use:   "info FILE",
		Short: "Print a .bit file's header and check its configuration stream",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			p := bitfile.NewParser(bitfile.Limits{})
			if _, err := f.WriteTo(p); err != nil {
				return fmt.Errorf("%s: %w: %w", args[0], errCheck, err)
			}
			res, err := p.Close()
			if err != nil {
				return fmt.Errorf("%s: %w: %w", args[0], errCheck, err)
			}
			h := res.Header
			info := map[string]any{
				"design": h.DesignName(), "options": h.Options(), "part": h.Part, "date": h.Date, "time": h.Time,
				"partial": h.Partial(), "data_bytes": h.DataLen, "idcode": fmt.Sprintf("%#08x", res.IDCode),
				"frame_bytes": res.FrameBytes, "crc": fmt.Sprintf("%#08x", res.CRC),
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(info)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "design   %s\noptions  %v\npart     %s\ndate     %s %s\npartial  %v\ndata     %d bytes (%d of frames)\nidcode   %#08x\ncrc      %#08x (checked)\n",
				h.DesignName(), h.Options(), h.Part, h.Date, h.Time, h.Partial(), h.DataLen, res.FrameBytes, res.IDCode, res.CRC)
			return nil
		},
	})
	return bit
}

func pushCommand() *cobra.Command {
	var keysFile string
	cmd := &cobra.Command{
		Use:   "push DIR REF [--keys FILE]",
		Short: "Push the image of a layout, its signatures and its sealed keys, to a registry",
		Long: `push copies the image of layout DIR to REF, with the signatures in the layout.
For a sealed image it also attaches the wrapped data keys (the keys file hdk
seal wrote, DIR.keys.json unless --keys says otherwise) as an artifact of type
application/vnd.faas.image.keys.v1+json whose subject is the image: that is how
the registry gets the keys it releases to entitled nodes.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ref, err := name.ParseReference(args[1])
			if err != nil {
				return err
			}
			keys, err := readKeys(args[0], keysFile)
			if err != nil {
				return err
			}
			progress := make(chan v1.Update, 16)
			done := make(chan struct{})
			go func() {
				defer close(done)
				var bar *progressbar.ProgressBar
				for u := range progress {
					if jsonOutput(cmd) || u.Total <= 0 {
						continue
					}
					if bar == nil {
						// Progress goes to stderr: stdout is for results.
						bar = progressbar.NewOptions64(u.Total, progressbar.OptionSetWriter(cmd.ErrOrStderr()),
							progressbar.OptionSetDescription("pushing "+ref.String()), progressbar.OptionShowBytes(true),
							progressbar.OptionThrottle(100*time.Millisecond))
					}
					bar.Set64(u.Complete)
				}
				if bar != nil {
					bar.Finish()
					fmt.Fprintln(cmd.ErrOrStderr())
				}
			}()
			res, err := publish.Layout(ctx, args[0], ref, keys, progress, remoteOptions(ctx)...)
			<-done
			if errors.Is(err, publish.ErrKeysMissing) {
				return fmt.Errorf("the image is sealed but %s does not exist: name the keys file hdk seal wrote with --keys", defaultKeys(args[0]))
			}
			if err != nil {
				return err
			}
			if jsonOutput(cmd) {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(map[string]any{"ref": ref.String(), "digest": res.Digest.String(), "signatures": res.Signatures, "keys": res.Keys})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pushed %s@%s (%d signature image(s))\n", ref.Context(), res.Digest, res.Signatures)
			if res.Keys != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "attached the wrapped keys as %s@%s\n", ref.Context(), res.Keys)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&keysFile, "keys", "", "keys file of a sealed image (default DIR.keys.json if it exists)")
	return cmd
}

func defaultKeys(dir string) string { return filepath.Clean(dir) + ".keys.json" }

// readKeys reads the keys file: file when given, else the layout's default
// one when it exists (nil when it does not).
func readKeys(dir, file string) ([]byte, error) {
	explicit := file != ""
	if !explicit {
		file = defaultKeys(dir)
	}
	data, err := os.ReadFile(file)
	if !explicit && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	return data, err
}
