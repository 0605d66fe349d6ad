// Package validation is the registry's durable image validation pipeline:
// every image an ISV lists is checked, its ISV signature verified and, when
// it passes, countersigned with the platform key (docs/ARCHITECTURE.md,
// "Publish").
//
// # Jobs
//
// A job is a row of validation_jobs (migrations/001_initial.sql), inserted
// pending when an ISV adds a listing version (package api). A [Worker]
// claims one runnable job — pending with run_after due, or validating with
// an expired lease — with "for update skip locked", sets state validating,
// lease_owner (its [Config.Owner]) and lease_until, and counts the attempt.
// It then
//
//  1. reads the image from the registry's own storage: an in-process OCI
//     distribution handler (package distribution over the same meta.Store
//     and blob.Store, with distribution.AllowAll) reached through an
//     http.RoundTripper that calls it directly, so go-containerregistry
//     reads manifest, config and layers with its usual digest checks, and
//     nothing is exposed on the network nor needs a credential;
//  2. runs hdk/validate with FullStream; error findings are the reasons;
//  3. verifies the ISV's cosign signature (the sha256-<hex>.sig tag of the
//     repository) against the ISV's registered, unrevoked signing keys (the
//     listing's owner, else the repository's owner, else the isv account
//     named like the repository's namespace); none valid gives the reason
//     [CodeSignature] "no valid ISV signature";
//  4. countersigns: hdk/sign.Sign with the platform key appends the
//     registry's signature to the same .sig image (cosign simple signing;
//     the payload's docker-reference is the repository name). Sign skips a
//     signature of the same payload by the same key, so a rerun adds none.
//
// and completes the job as available or failed (reasons stored as JSON
// findings {code, severity, chip, field, message}); for an available image it
// records the FPGA part each of its chips needs (its config's chips[].part,
// in board order: validation_jobs.parts), by which the pool places it. Completion is an update
// conditional on lease_owner = this worker and state = validating: a worker
// whose lease expired and was taken over gets [ErrLeaseLost] and changes
// nothing. A worker killed mid-job leaves its lease to expire; the next
// worker redoes the job, idempotently. Failures of the registry's storage
// (database or blob store unreachable) put the job back to pending with an
// exponential run_after backoff ([Config.Backoff] doubling up to
// [Config.MaxBackoff]); after max_attempts the job fails with
// [CodeAttemptsExhausted].
//
// # Platform keys
//
// [LoadPlatformKeys] reads (creating when missing) the platform's keys in a
// directory: an ECDSA P-256 signing key for countersignatures and an X25519
// recipient key that ISVs seal data keys to (hdk seal --recipient
// platform-seal.pub); private keys are 0600.
//
// The package logs only through Config.Logger.
package validation
