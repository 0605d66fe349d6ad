// Package distribution serves the OCI Distribution Specification v1.1 API
// under /v2/: pull, push (monolithic, chunked and resumable uploads,
// cross-repository mounts), tags, deletes, the catalog and the referrers
// API. [New] returns a [Handler], an http.Handler built on echo; the
// metadata lives in meta.Store (PostgreSQL) and the bytes in a blob.Store.
//
// # Visibility
//
// Upload bytes are staged in the blob store and committed only once their
// digest is verified; only then is the blob recorded and linked into the
// repository. A manifest is accepted only when every blob and child manifest
// it references is present in the repository (MANIFEST_BLOB_UNKNOWN
// otherwise), and it is stored in one transaction, so clients never see a
// partial blob or a manifest with missing content.
//
// # Digests
//
// Blobs and manifests are addressed by sha256 or sha512 digests everywhere
// (uploads, mounts, pulls, deletes, manifests by digest, referrers). A blob
// is verified with the algorithm of the digest it is committed under; a
// POST may announce it with digest-algorithm, which is only checked. A
// manifest pushed by digest keeps that digest; one pushed by tag gets its
// canonical (sha256) digest, so tags of a sha512 manifest come as tag
// parameters of a push by digest (PUT …/manifests/sha512:…?tag=a&tag=b,
// answered with an OCI-Tag header per tag). A malformed digest, or one of
// another algorithm, answers 400 DIGEST_INVALID (an unknown
// digest-algorithm 400 UNSUPPORTED).
//
// # Immutable tags
//
// A tag that names a version of the repository's listing (listing_versions:
// the version's name is the tag) never moves, and a tag matching one of the
// repository's tag rules (migration 010, managed through the API; cosign's
// signature tags excepted) never moves once set; see meta, "Immutable
// tags". Every manifest PUT (hdk,
// crane, oras, docker, cosign and the portal's uploads all push through
// it) is checked, for the tag of its path and every tag parameter, in the
// transaction that would store it: a refusal stores nothing, so the tag,
// the manifest and the listing keep agreeing. Blobs uploaded before the
// refused manifest stay unreferenced until garbage collection. Pushing the
// digest the tag names again succeeds, as a retried push must: ECR's
// immutable repositories refuse even that, and CI pipelines that push a
// rebuilt, identical image fail on it (moby/buildkit#3776). So does any
// push of a version's own digest under its name. Deleting such a tag, or a
// manifest that a version or such a tag names, is refused alike.
//
// The refusal is 409 Conflict with code TAG_INVALID, the code ECR answers
// for its immutable tags and which docker prints as "tag invalid: …";
// ECR's status is 400, Harbor's 412 (code DENIED), and 409 says what
// happened: the request is well formed and only the tag's state refuses
// it. The message names the tag, the repository, the listing and version
// (or the rule) and the digest the tag keeps; the detail repeats them as
// {"tag","digest","listing"|"rule"}.
//
// # Authorization
//
// Every request is passed to the configured [Authorizer] with the repository
// and the actions it needs ("pull", "push", "delete", or "catalog" for the
// registry-wide catalog, repository ""). The API version check GET /v2/
// asks with no actions, meaning "is this caller authenticated". An error
// wrapping [ErrUnauthorized] answers 401 UNAUTHORIZED, with the
// WWW-Authenticate challenge of the Authorizer if it also implements
// [Challenger]; [ErrDenied] answers 403 DENIED. This package has no policy of
// its own: [AllowAll] admits everyone and is meant for tests.
//
// Upload requests ask for "push", with two exceptions for clients that
// keep one token per method, as the reference registry's grants go (GET
// and HEAD: pull; DELETE: delete): the status of an upload (GET
// …/blobs/uploads/<id>) is also answered with "pull" to the account that
// started the upload, and an upload is also cancelled with "delete".
// Knowing the account takes an [AccountAuthorizer]; upload sessions record
// it.
//
// # Redirects
//
// With Config.BlobRedirects and a blob store that implements
// blob.Redirector (s3store), a GET of a whole blob is answered, after the
// same authorization and repository check as always, with 307 Temporary
// Redirect to a short-lived URL of the store (Location, Docker-Content-Digest,
// no body), and the client fetches the bytes from the store directly. HEAD
// and GETs with a Range header are still answered here.
//
// A client that set the Authorization header on its request may resend it
// on the redirect: Go's http.Client does so whenever the target's host name
// is the request's or a subdomain of it, whatever the port. S3 refuses a
// presigned URL that comes with an Authorization header (AWS: "only one
// auth mechanism allowed"; MinIO, for a bearer token: 400 InvalidRequest,
// "request has multiple authentication types"). So a
// request with an Authorization header whose Host has the redirect URL's
// host name (or is a parent domain of it) is served directly instead of
// redirected; deployments get the redirects by giving the store's public
// endpoint a host name of its own (e.g. s3.example.com beside
// registry.example.com). go-containerregistry (crane) adds the header in
// its transport, only for the registry's host:port, and never resends it.
//
// # Uploads and their limits
//
// Nothing that waits on a client's body holds a database connection, a
// transaction or a lock others need. A PATCH or PUT reads its session in
// one short query, streams the body into the blob store's staging, and
// then records the new offset in one statement that succeeds only if the
// recorded offset is still the one it read (meta.Store.AdvanceUpload), or
// records the blob and ends the session in one short transaction. Two
// requests writing one upload at once are refused 416 RANGE_INVALID: within
// a process by an in-memory claim on the upload, across processes by that
// conditional update. Content a conflict may have mixed into the staging
// never becomes a blob: the commit verifies the digest. A monolithic upload
// (POST with a digest) is a session too while its body arrives.
//
// Bodies slower than Config.MinBodyRate bytes per second over a window of
// Config.MinBodyRateWindow are cut with 408 (upload bodies keep what
// arrived: the client resumes from the status); one account sends at most
// Config.MaxConcurrentUploads upload bodies at a time, beyond which
// requests answer 429 TOOMANYREQUESTS with Retry-After. An account also
// has at most Config.MaxUploadSessions sessions open and
// Config.MaxStagedBytes staged in them (429 beyond; a body that crosses the
// limit keeps what fit). The account is the one an [AccountAuthorizer]
// names; without one all requests count as one anonymous account.
//
// These limits hold across all processes serving the API on one database.
// Sessions and the bytes they recorded are rows already; a body in flight
// is recorded too (meta.ReserveUploadBody, table upload_bodies) when it
// begins, in one short transaction under a lock of its account that counts
// the account's bodies and adds its staged bytes and those reserved for
// its bodies in flight. A body of declared length reserves that length; one
// without reserves in growing steps as it arrives (8 MiB, then its size so
// far, up to 256 MiB at a time), so that the database is written a few
// times per body, never per chunk. A body's record carries a lease of
// Config.UploadBodyLease, which [Handler.RenewUploadLeases] renews for all
// the process's bodies at once; a crashed process's bodies stop counting
// once their lease has passed. The record ends after what the body staged
// is recorded in its session, so that it is counted briefly twice rather
// than not at all. A count per process remains as a fast path that refuses
// without asking the database.
//
// A session without activity for Config.UploadIdleTimeout is unknown (404
// BLOB_UPLOAD_UNKNOWN). [Handler.SweepUploads], which the serving process
// runs at start and on a schedule, ends such sessions and removes their
// staging, and removes staging no session names once it is a minute old
// (left by a crash between a store's Begin and the session's insert, or by
// an older version's monolithic upload killed mid-body).
//
// Manifest bodies are capped by Config.MaxManifestBytes and upload chunks by
// Config.MaxChunkBytes. Read and write timeouts, overall request body
// limits, TLS and request ids belong to the http.Server and middleware the
// caller wraps around the handler.
//
// # Errors
//
// Failures are answered in the specification's JSON form,
// {"errors":[{"code":…,"message":…,"detail":…}]}, with its status codes.
// A write the blob store refuses for want of space (blob.ErrStorageFull)
// answers 507 Insufficient Storage, code UNKNOWN, with a message that says
// the storage is full. A request the metadata database cannot serve for
// now (meta.ErrUnavailable: out of disk space or memory, read-only,
// unreachable) answers 503 Service Unavailable with Retry-After (seconds,
// meta.RetryAfter) and code UNAVAILABLE, which is ours: the specification
// lists no code for it, clients show the message of a code they do not
// know, and the token endpoint answers the same code. The message names
// the cause ("the registry cannot answer for now: the database is
// read-only; try again in a few seconds") and nothing of the database's
// internals. Any other unexpected failure answers 500 UNKNOWN.
package distribution
