// Package blob is the registry's content-addressed blob store contract: the
// [Store] interface, its errors, the [Digest] type and the store side of
// garbage collection ([Collect], with a [Marker] for the metadata side). Implementations live in dirstore (a local directory, the
// embedded default) and s3store (S3 via minio-go); blobtest is the
// conformance suite both pass.
//
// # Visibility and staging
//
// A blob is visible (Stat, Open, List) only once it is complete and its
// digest verified. A blob is addressed by a [Digest] of one of the
// [Algorithms], sha256 (the [Canonical] one) or sha512; the same bytes
// committed under both are two blobs. The algorithm of the digest given to
// [Upload.Commit] is the one the staged content is hashed with.
//
// Content reaches the store only through an [Upload]: [Store.Begin] starts
// one, [Upload.Write] appends to its staged data (kept apart from the
// blobs, under an "uploads/" prefix), and [Upload.Commit] reads back
// everything staged, checks it against the expected digest and only then
// moves it to the blob's key in one atomic step (a rename, or a
// server-side copy). A process crash at any point therefore leaves either
// no blob or the whole, verified blob; at worst it leaves staged data
// behind, which [Store.Uploads] lists and [Collect] removes once it is idle
// for longer than [GCOptions.UploadTTL].
//
// Uploads are durable and resumable: [Store.Resume] finds an upload by
// [Upload.ID] from any Store instance over the same storage, also after a
// restart, at the offset that was durably written. A Write that fails may
// have stored a prefix of its data (dirstore) or none of it (s3store);
// [Upload.Offset] reports the truth afterwards either way. An upload takes
// one writer at a time: the caller serializes Write and Commit on an id
// (the registry does so through its upload session row). A wrong order of
// writes cannot expose wrong content, since Commit verifies the digest.
//
// Committing a digest that already exists replaces it with identical bytes
// and refreshes its modification time, which the grace period of [Collect]
// relies on. Concurrent commits of the same digest are safe; a commit
// concurrent with [Collect] is safe only through the [Marker], whose Sweep
// must keep commits of the digest it removes waiting (the registry's callers
// announce each commit with meta.Store.HoldBlob).
//
// # Redirects
//
// A Store may also implement [Redirector] (s3store does; dirstore does not):
// it signs a short-lived URL from which a client fetches a blob straight from
// the storage service. This is an optional capability, found by type
// assertion, because it is not content access the store mediates: whoever
// holds the URL can read the blob until it expires, with no further check.
// Callers must authorize the request before asking for one.
//
// # Errors
//
// Errors wrap the sentinels [ErrNotFound], [ErrDigestMismatch],
// [ErrInvalidRange], [ErrInvalidDigest] (refined by [ErrUnsupportedDigest]
// for well-formed digests of other algorithms) and [ErrStorageFull] (a write
// refused for want of space: ENOSPC or EDQUOT from the file system, MinIO's
// XMinioStorageFull or any 507 from S3); test them with errors.Is. A Store
// may also implement [SpaceChecker] to say whether it is full right now.
package blob
