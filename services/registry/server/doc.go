// Package server wires the registry's parts into one running service: the
// PostgreSQL metadata (meta, with
// the schema of the migrations package applied at start), the blob store
// (s3store when an S3 endpoint is configured, else dirstore under the data
// directory), the accounts and JWT keyring of package auth, and the OCI
// distribution API of package distribution.
//
// # Endpoints
//
//	/v2/…          OCI distribution API, bearer tokens required (Docker token flow)
//	/auth/token    token endpoint (HTTP Basic: password or API token)
//	/api/v1/…      marketplace REST API (package api; Basic or API-token auth)
//	/api/v1/keys/release  data-key release to nodes (package keyrelease)
//	/healthz       200 while the process serves requests
//	/readyz        200 when the database answers a ping and the blob store is
//	               reachable and not full (blob.SpaceChecker), else 503 with
//	               "not ready: blob storage is full" or, for reasons that may
//	               name hosts (logged instead), "not ready"
//	/metrics       only on the metrics listener (ServeMetrics; the command's
//	               --metrics-listen, loopback by default), 404 on the public
//	               one; Prometheus metrics:
//
//	faas_registry_http_requests_total{route,method,code}
//	faas_registry_http_request_duration_seconds{route,method}
//	faas_registry_storage_full                       1 while the blob store reports full
//	faas_registry_storage_refused_writes_total       answers 507 (writes refused for want of space)
//	faas_registry_gc_runs_total{result}              ok, error or busy
//	faas_registry_gc_removed_blobs_total, faas_registry_gc_freed_bytes_total
//	faas_registry_gc_last_success_timestamp_seconds
//	faas_registry_attachments{state}                 the pool's live attachments: pending, loading, ready
//	faas_registry_attachments_ended_total{state}     failed, detached, expired, lost
//	faas_registry_attachments_unreleased             ended, not yet released by their node
//
// plus the Go and process collectors.
//
// Serve also sweeps upload sessions, at start and every
// Config.UploadSweepInterval (10 minutes): it ends sessions idle for longer
// than Config.UploadIdleTimeout (1 hour) and removes their staging, and
// removes staging that no session names (see
// distribution.Handler.SweepUploads).
//
// Serve also runs a webhooks.Worker (package webhooks), which delivers the
// accounts' webhooks and scans for expiring API tokens, configured by
// Config.Webhooks.
//
// Serve also runs a validation.Worker (package validation) until it returns;
// the platform keys it countersigns with, and that key release unwraps with,
// live in Config.PlatformKeyDir. And it collects garbage (package gc) every
// Config.GCInterval, the first time at most 5 minutes after the start;
// [Server.CollectGarbage] runs one collection on demand (`registry gc`).
//
// Every response carries X-Request-Id (the client's, when it sent a sane one;
// else a fresh random id) and every request is logged once through
// Config.Logger with the request id, method, path, route class, status, bytes
// and duration. Header values (notably Authorization) and query strings (which
// may carry an account name) are never logged.
//
// # Authorization
//
// The distribution API asks an Authorizer built on auth.BearerAuthorizer: a
// missing or invalid token answers 401 with a WWW-Authenticate challenge
// (Bearer realm="…/auth/token",service="…",scope="repository:NAME:ACTIONS"),
// a valid token without the scope 403 DENIED. The catalog (repository "",
// action "catalog") is admin-only: auth.TokenHandler grants no scopes of type
// "registry", so the authorizer checks the token's subject to be an enabled
// admin account instead of looking for a registry:catalog:* grant.
//
// Tokens are granted by Policy (see NewPolicy):
//
//   - admin: every action on every repository;
//   - the owner of a namespace — an isv account whose name is the first path
//     component of the repository, "isv1/…" for account isv1 — pull, push
//     and delete;
//   - a node account: pull only, and only a repository of which one of its
//     nodes holds a live attachment of the accelerator pool (the pool
//     assigned it that image); loads a tenant asks a node for directly pull
//     with the tenant's own token;
//   - any other account (tenant, other isvs): pull only, and only when
//     the repository belongs to a listing (listings.repository_id) that is
//     published with visibility public, or for which the account holds an
//     active entitlement (not revoked, not expired) of any kind;
//   - anonymous requests are refused at the token endpoint.
//
// Entitlements grant pulls whether or not the listing is currently
// published, so that unpublishing does not cut off existing subscribers.
//
// # Limits
//
// The http.Server has read-header, read, write and idle timeouts; request
// bodies are capped at Config.MaxBodyBytes outside the blob upload endpoints,
// whose chunks are capped at Config.MaxChunkBytes (manifests by the
// distribution package's own limit). Every password check, at the token
// endpoint, /api/v1 and the key release alike, runs inside auth.Store under
// Config.PasswordLimits: concurrent argon2id hashes share a memory budget
// (503 and Retry-After when it stays full), and each account and each client
// address is locked out with doubling delays after repeated failures (429
// and Retry-After). The client address is the socket peer unless the peer
// is one of Config.TrustedProxies (package clientip).
// Upload and manifest bodies slower than Config.MinBodyRate are cut, and
// one account sends at most Config.MaxConcurrentUploads upload bodies at a
// time and stages at most Config.MaxStagedBytes, counted across all
// replicas on the database (see package distribution; Serve renews the
// leases of this replica's bodies every third of Config.UploadBodyLease):
// no request waiting on a client's body holds a database connection.
//
// The package logs only through Config.Logger.
package server
