// Package seal encrypts and authenticates bitstream layers so that a node can
// decrypt and verify them while streaming, or in parallel, without ever
// holding unauthenticated plaintext.
//
// A sealed blob is a fixed-size authenticated header followed by chunks of
// AES-256-GCM ciphertext (see FORMAT.md for the byte-level layout). Every
// chunk's nonce and additional data bind the header, the chunk's index and
// whether it is the last one, so chunks cannot be reordered, duplicated,
// dropped or truncated without detection.
//
// The per-layer [DataKey] never travels inside the image. The registry keeps
// it and releases it wrapped to one node's X25519 key with [WrapKey]; the node
// recovers it with [UnwrapKey].
//
// Decryption is incremental: [NewReader] and [Unseal] release plaintext one
// verified chunk at a time. Each released chunk is authentic, but the stream
// as a whole is only known to be complete and correct once [Reader.Read]
// returns io.EOF or [Unseal] returns nil. A consumer must not act on the data
// (for example, program it into an FPGA) before then.
//
// Failures are reported with errors that match [ErrFormat] (malformed input,
// detectable without the key), [ErrAuth] (anything that fails authentication:
// wrong key, tampering, reordering, truncation) or [ErrKey] (a wrapped key
// that cannot be unwrapped), tested with errors.Is.
package seal
