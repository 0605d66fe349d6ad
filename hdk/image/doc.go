// Package image is the accelerator image format of the platform: an OCI
// image manifest v1.1 whose artifactType is [ArtifactType], whose config is a
// [Config] of media type [ConfigMediaType], and which carries one layer per
// chip, a partial bitstream of media type [BitstreamMediaType] (a Xilinx .bit
// file with its header) or [SealedBitstreamMediaType] (the same, encrypted).
// SPEC.md in this directory is the format's reference, with a JSON Schema of
// the config.
//
// ISVs describe an image in an image.yaml file, a [Manifest]: [Load] reads it
// and checks each bitstream's .bit header against the board, and [Build] turns
// it into a [v1.Image] whose digest depends only on the inputs. [WriteLayout]
// and [ReadLayout] store images in an OCI image layout directory, [Push] and
// [Pull] move them to and from a registry, [ConfigOf] reads the config of an
// image after checking its media types, and [Inspect] summarises an image.
//
// Structural checks here are the ones building needs; the deep checks of an
// image (shell version ranges, resources, signatures) belong to hdk/validate.
package image
