package image

import "github.com/google/go-containerregistry/pkg/v1/types"

// Media types of an accelerator image.
const (
	// ArtifactType is the artifactType of the image manifest.
	ArtifactType = "application/vnd.faas.image.v1"
	// ConfigMediaType is the media type of the config, a JSON [Config].
	ConfigMediaType types.MediaType = "application/vnd.faas.image.config.v1+json"
	// BitstreamMediaType is the media type of a layer holding a partial
	// bitstream as a Xilinx .bit file, header included.
	BitstreamMediaType types.MediaType = "application/vnd.faas.bitstream.v1"
	// SealedBitstreamMediaType is the media type of a layer holding a
	// sealed (encrypted) partial bitstream; see hdk/seal.
	SealedBitstreamMediaType types.MediaType = "application/vnd.faas.bitstream.v1+sealed"
)

// Annotation keys used on manifests, layers and layout index entries.
const (
	AnnotationTitle       = "org.opencontainers.image.title"
	AnnotationVersion     = "org.opencontainers.image.version"
	AnnotationVendor      = "org.opencontainers.image.vendor"
	AnnotationDescription = "org.opencontainers.image.description"
	AnnotationLicenses    = "org.opencontainers.image.licenses"
	AnnotationCreated     = "org.opencontainers.image.created"
	AnnotationSource      = "org.opencontainers.image.source"
	AnnotationRefName     = "org.opencontainers.image.ref.name"
)
