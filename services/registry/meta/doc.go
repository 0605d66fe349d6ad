// Package meta is the registry's metadata store in PostgreSQL, the source of
// truth for what the OCI distribution API shows: repositories, the blobs
// linked into each repository, manifests (their bytes, media type,
// artifactType and subject), tags and blob upload sessions. It works on the
// schema of the migrations package (001_initial.sql) through a pgxpool.Pool.
//
// # Visibility
//
// The blob bytes live in a blob.Store; a blob row and its repository link are
// written only after the store committed the verified content, so a digest
// this package reports is always readable. A manifest is recorded in one
// transaction together with the blobs and child manifests it references,
// and the transaction fails (with [ErrBlobUnknown] or [ErrManifestUnknown])
// when any of them is not linked into the repository: a visible manifest
// never points at missing content. Links, manifests and their references
// use foreign keys, so a concurrent delete cannot slip in between the check
// and the insert.
//
// Blob links give access: a repository can read (and mount into another
// repository) only the blobs linked into it. Deleting a link does not delete
// the bytes; garbage collection ([GC], run by blob.Collect) removes blobs
// that no manifest references and that nothing linked, recorded or held
// ([Store.HoldBlob]) within its grace period, with their links.
//
// # Garbage collection and concurrent pushes
//
// The blob store commits bytes before this package records them, so a
// collection could otherwise delete bytes that a push has just committed
// again. Every commit therefore calls [Store.HoldBlob] first: it waits for
// a sweep of the same digest in progress to finish, and its hold keeps the
// digest live for the grace period. A sweep ([GC.Sweep]) takes the same
// per-digest advisory lock, locks the blob's links and row (as PutManifest
// and MountBlob do, in the same order), checks liveness again and only then
// deletes rows and bytes, so a manifest put or a mount either lands first,
// and the blob stays, or finds the link gone and fails with
// [ErrBlobUnknown]: a visible manifest never points at removed bytes.
//
// # Upload sessions
//
// A session row names an upload of the blob store (staged_key) and the
// account that started it. Writers never hold its row while a body
// arrives: they read it, stage bytes, and then move its byte_offset with a
// conditional update ([Store.AdvanceUpload]) that fails with
// [ErrUploadConflict] when another writer moved it first.
//
// # Upload bodies in flight
//
// The bodies the registry's processes are receiving are rows too
// (upload_bodies, migration 008), so that the limits per account hold
// across processes: [Store.ReserveUploadBody] admits a body, or grows its
// reservation of bytes, in one transaction under an advisory lock of the
// account, counting the account's other bodies and adding the bytes
// staged in its sessions to those reserved for its bodies; it refuses
// with [ErrTooManyBodies] or [ErrStagingFull]. Each row has a lease the
// receiving process renews ([Store.RenewUploadBodies]); rows past it no
// longer count, and admissions and [Store.ExpireUploadBodies] delete them.
//
// # Immutable tags
//
// A tag that names a version of the repository's listing (listing_versions,
// by the version's name) names that version's digest for good, and a tag
// matching one of the repository's tag rules (tag_rules, migration 010)
// keeps the digest it was first set to (cosign's signature, attestation
// and SBOM tags excepted: signing appends to them). [Store.PutManifest]
// checks every tag it would set before it stores anything,
// [Store.DeleteTag] and [Store.DeleteManifest] every tag they would take
// away, all under a lock per tag ([LockTag]) that the API also takes
// before it adds a version, so that a push and a new version of the same
// name cannot interleave.
// Setting a tag again to the digest it names succeeds. Refusals are
// *[ImmutableError]s naming the listing and version, or the rule.
//
// # Errors
//
// Errors wrap the sentinels [ErrNotFound] (and its refinements
// [ErrRepositoryUnknown], [ErrBlobUnknown], [ErrManifestUnknown],
// [ErrUploadUnknown]), [ErrUploadConflict], [ErrInUse], [ErrTooManyUploads],
// [ErrTooManyBodies], [ErrStagingFull] and [ErrTagImmutable]; test them with
// errors.Is.
//
// # Faults of the database
//
// A database that cannot serve requests for now is not the request's
// fault, and its callers should retry rather than fail. [Unavailable] is
// the registry's one classification of such faults, for every package
// that works on this database (this one, api, auth, nodetrust, keyrelease
// and the portal share one pool): it wraps
// the driver's error with [ErrUnavailable] and one cause whose text users
// may read ([ErrDiskFull] for SQLSTATE 53100, [ErrOutOfMemory],
// [ErrTooManyClients], [ErrOutOfResources] for the rest of class 53;
// [ErrReadOnly] for 25006, also a hot standby's answer to a write;
// [ErrUnreachable] for 57P01–57P03, class 08, connection failures and the
// driver's network errors). Errors of other clients (the blob store's
// network) and a caller that went away (context.Canceled) are not faults.
// [Cause] returns the cause's text, and [UnavailableMessage] the sentence
// every HTTP edge answers with status 503 and Retry-After ([RetryAfter]).
//
// Only the HTTP edges turn these errors into answers. The stores of this
// package, api and auth wrap where they already map driver errors, but
// many store methods return the driver's errors as they come, so the edges
// pass every error through Unavailable again before they test it with
// errors.Is: a path that did not wrap still answers 503, never 500.
package meta
