// Package validate checks accelerator images: the checks that `hdk validate`
// runs before an ISV pushes an image and that the registry runs before it
// countersigns one (hdk/image/SPEC.md).
//
// [Image] checks an image and returns a [Report] of [Finding]s. Each finding
// carries a stable [Code], such as SHELL_VERSION_INVALID or ROLE_MISMATCH,
// that tools and the registry API can match on, and a message for people;
// CODES.md lists every code. Checking is not fail-fast: every check that
// can run does, so an ISV sees every problem of an image at once. A check
// that depends on something already found wrong is skipped rather than
// reported twice (a chip whose layer is missing gets no bitstream checks).
//
//	r := validate.Image(ctx, img, validate.Options{FullStream: true})
//	for _, f := range r.Findings {
//		fmt.Println(f) // BITSTREAM_PART_MISMATCH: chips[1].part: the .bit header is for part …
//	}
//	if err := r.Err(); err != nil { // wraps ErrInvalid, lists the codes
//		return err
//	}
//
// Image never panics and never reads more than [Options] allow: the config
// and the layers are read within their size limits, layer bytes are hashed
// against their digests while they are read (go-containerregistry verifies
// digests only when reading from a registry), and reading stops when the
// context is done.
//
// Plain layers get their .bit header checked against the config (part, role,
// PARTIAL=TRUE) and, with [Options.FullStream], their configuration stream
// parsed as the shell's PR controller will parse it. Sealed layers can only
// be checked as far as the key is not needed: their seal header.
package validate
