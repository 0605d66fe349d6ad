package validate

import "slices"

// Code identifies a kind of finding. Codes are stable: tools and the
// registry's API match on them, so a code is never renamed or reused.
type Code string

// Severity says whether a finding makes an image invalid.
type Severity string

const (
	// SeverityError: the image must not be published or loaded.
	SeverityError Severity = "error"
	// SeverityWarning: the image is valid, but probably not as intended.
	SeverityWarning Severity = "warning"
)

// Codes of findings, in the order of CODES.md.
const (
	ManifestInvalid         Code = "MANIFEST_INVALID"
	ArtifactTypeInvalid     Code = "ARTIFACT_TYPE_INVALID"
	ConfigInvalid           Code = "CONFIG_INVALID"
	ConfigTooLarge          Code = "CONFIG_TOO_LARGE"
	ConfigDigestMismatch    Code = "CONFIG_DIGEST_MISMATCH"
	LayerTooLarge           Code = "LAYER_TOO_LARGE"
	TooManyLayers           Code = "TOO_MANY_LAYERS"
	FieldMissing            Code = "FIELD_MISSING"
	FieldInvalid            Code = "FIELD_INVALID"
	FieldUnknown            Code = "FIELD_UNKNOWN"
	ShellUnknown            Code = "SHELL_UNKNOWN"
	ShellVersionInvalid     Code = "SHELL_VERSION_INVALID"
	ShellInterfaceMismatch  Code = "SHELL_INTERFACE_MISMATCH"
	BoardUnknown            Code = "BOARD_UNKNOWN"
	ChipIndexInvalid        Code = "CHIP_INDEX_INVALID"
	PartMismatch            Code = "PART_MISMATCH"
	BothChipsIncomplete     Code = "BOTH_CHIPS_INCOMPLETE"
	RoleUnknown             Code = "ROLE_UNKNOWN"
	RoleVersionIncompatible Code = "ROLE_VERSION_INCOMPATIBLE"
	LayerMissing            Code = "LAYER_MISSING"
	LayerUnexpected         Code = "LAYER_UNEXPECTED"
	LayerMediaTypeInvalid   Code = "LAYER_MEDIA_TYPE_INVALID"
	LayerDigestMismatch     Code = "LAYER_DIGEST_MISMATCH"
	BitstreamHeaderInvalid  Code = "BITSTREAM_HEADER_INVALID"
	BitstreamPartMismatch   Code = "BITSTREAM_PART_MISMATCH"
	RoleMismatch            Code = "ROLE_MISMATCH"
	BitstreamNotPartial     Code = "BITSTREAM_NOT_PARTIAL"
	BitstreamInvalid        Code = "BITSTREAM_INVALID"
	SealHeaderInvalid       Code = "SEAL_HEADER_INVALID"
	ReadFailed              Code = "READ_FAILED"
)

// CodeInfo documents a code.
type CodeInfo struct {
	Code        Code
	Severity    Severity
	Description string // one line
}

// codes is the catalog; CODES.md must say the same (TestCodesDoc).
var codes = []CodeInfo{
	{ManifestInvalid, SeverityError, "The manifest does not parse, or is not an OCI image manifest (schemaVersion 2, mediaType application/vnd.oci.image.manifest.v1+json)."},
	{ArtifactTypeInvalid, SeverityError, "The manifest's artifactType is not application/vnd.faas.image.v1."},
	{ConfigInvalid, SeverityError, "The config's media type is not application/vnd.faas.image.config.v1+json, or the config is not a JSON object of the schema's types."},
	{ConfigTooLarge, SeverityError, "The config is larger than the limit (1 MiB by default)."},
	{ConfigDigestMismatch, SeverityError, "The config's bytes do not match the digest or size of its descriptor."},
	{LayerTooLarge, SeverityError, "A layer is larger than the limit (512 MiB by default); it is not read."},
	{TooManyLayers, SeverityError, "The manifest has more layers than the limit (2 by default, one per chip); no layer is read."},
	{FieldMissing, SeverityError, "A required config field is absent or empty."},
	{FieldInvalid, SeverityError, "A config field has a malformed value: layer digest, interface UUID, clock, power or build date."},
	{FieldUnknown, SeverityWarning, "The config has a member the schema does not define, often a misspelt optional field; readers ignore it."},
	{ShellUnknown, SeverityError, "shell.name is not the platform's shell, faas-shell."},
	{ShellVersionInvalid, SeverityError, "shell.versions does not parse, or does not accept the current shell version (1.0)."},
	{ShellInterfaceMismatch, SeverityError, "shell.interface_uuid is not the PR interface UUID of the current shell."},
	{BoardUnknown, SeverityError, "board is not a board model of the shell."},
	{ChipIndexInvalid, SeverityError, "A chip index is not 0, 1 or \"any\", is given twice, or \"any\" is not alone."},
	{PartMismatch, SeverityError, "A chip's part is not a part of the shell, or not the part the board has on that chip."},
	{BothChipsIncomplete, SeverityError, "both_chips_required is set, but the chips are not exactly chip 0 and chip 1."},
	{RoleUnknown, SeverityError, "A chip's role is not in the platform's role catalog."},
	{RoleVersionIncompatible, SeverityError, "A chip's role version is malformed or not a released version of the role."},
	{LayerMissing, SeverityError, "A chip's layer digest names no layer of the manifest (each chip needs a layer of its own)."},
	{LayerUnexpected, SeverityError, "A layer of the manifest belongs to no chip."},
	{LayerMediaTypeInvalid, SeverityError, "A layer is not a plain or sealed bitstream, or its media type disagrees with the chip's sealed flag."},
	{LayerDigestMismatch, SeverityError, "A layer's bytes do not match the digest or size of its descriptor."},
	{BitstreamHeaderInvalid, SeverityError, "A plain layer does not start with a well-formed .bit header."},
	{BitstreamPartMismatch, SeverityError, "The part in a .bit header is not the chip's part."},
	{RoleMismatch, SeverityError, "The design name in a .bit header is not the chip's role name."},
	{BitstreamNotPartial, SeverityError, "A .bit header does not mark a partial bitstream (PARTIAL=TRUE)."},
	{BitstreamInvalid, SeverityError, "The full-stream check failed: sync word, packets, CRC, DESYNC, or an IDCODE not of the chip's part."},
	{SealHeaderInvalid, SeverityError, "A sealed layer's seal header is malformed or does not match the layer's size."},
	{ReadFailed, SeverityError, "Part of the image could not be read (network error, cancelled); it was not fully checked."},
}

// Codes returns every code with its severity and description.
func Codes() []CodeInfo { return slices.Clone(codes) }

// severity returns the severity of findings of code c.
func severity(c Code) Severity {
	for _, ci := range codes {
		if ci.Code == c {
			return ci.Severity
		}
	}
	return SeverityError
}
