// Package sign signs and verifies accelerator images the way cosign does, so
// that `cosign sign --key` and `cosign verify --key` interoperate with the
// platform (docs/ARCHITECTURE.md, "Contracts").
//
// # Format
//
// A signature is cosign's "simple signing" payload
//
//	{"critical":{"identity":{"docker-reference":REPO},
//	             "image":{"docker-manifest-digest":"sha256:..."},
//	             "type":"cosign container image signature"},
//	 "optional":null}
//
// signed with ECDSA P-256 over the SHA-256 of the exact payload bytes. The
// ASN.1 DER signature is stored base64-encoded in the layer annotation
// dev.cosignproject.cosign/signature. Signatures of an image live in one OCI
// image whose layers are the payloads (media type
// application/vnd.dev.cosign.simplesigning.v1+json), tagged
// sha256-<hex>.sig in the image's own repository (cosign's tag scheme). Sign
// appends to that image; signing twice with the same key is a no-op, as in
// cosign. Concurrent signers of the same image race on the tag, as they do
// with cosign: the last writer wins.
//
// Signatures are stored either in a registry (the default, tuned with
// [WithRemoteOptions]) or in an OCI image layout directory ([WithLayout]),
// where the signature image is listed in index.json with the tag as its
// org.opencontainers.image.ref.name annotation.
//
// # Verification and identity
//
// [Verify] accepts a signature layer only if its signature verifies against
// one of the given keys and its payload names exactly the manifest digest
// being verified. Like cosign's default (cosign verify without
// --check-claims=false), the claimed identity (docker-reference) is not
// checked: the digest is what binds a signature to an image. Pass
// [WithIdentity] to also require an exact docker-reference, e.g. the
// repository name ref.Context().Name() that [Sign] writes by default.
//
// # Keys
//
// Keys are ECDSA P-256. Private keys are read and written as unencrypted
// PKCS #8 PEM ("PRIVATE KEY") or in cosign's encrypted format ("ENCRYPTED
// SIGSTORE PRIVATE KEY": scrypt + nacl/secretbox around the PKCS #8 DER), so
// an ISV can keep the cosign.key it already has; public keys are PKIX PEM
// ("PUBLIC KEY"). Passwords come from the caller, conventionally from
// COSIGN_PASSWORD (see [EnvPassword]); nothing here logs key material.
package sign
