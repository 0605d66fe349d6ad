// Package auth is the registry's authentication and token layer.
//
// It holds five pieces:
//
//   - Passwords: argon2id, encoded as a PHC string
//     ($argon2id$v=19$m=…,t=…,p=…$salt$hash) so the cost can be raised later
//     (NeedsRehash). ParseHash treats the stored string as outside input and
//     bounds every parameter before any memory is spent on it.
//   - Store: accounts (roles isv, tenant, admin, node) and API tokens over a
//     pgxpool, on the tables of migrations/001_initial.sql. Authenticate does
//     the same work and returns the same ErrUnauthenticated for an unknown
//     account, a disabled one, one without password and a wrong password.
//     API tokens are "faas_" + 43 base64url characters (32 random bytes); only
//     their SHA-256 is stored, and they are found by it: 256 random bits need
//     no slow hash, so token checks never run argon2id.
//   - Limits, enforced inside Store.Authenticate so that no endpoint can
//     skip them: concurrent argon2id hashes share a memory budget (a check
//     waits in a bounded queue, then fails with ErrBusy), and each account
//     name and each client address (clientip) is locked out with doubling
//     delays after repeated failures (ErrRateLimited, refused even with the
//     right password); concurrent checks of one account queue, so a burst
//     of guesses counts as the same guesses one after the other. Both
//     refusals come as a *RetryError saying when to retry. The failure
//     counts and lockouts live in PostgreSQL (login_failures), so replicas
//     share one budget; the hashing memory and the queues are per process.
//   - Keyring: short-lived JWT access tokens signed with Ed25519 ("EdDSA"),
//     each key named by a kid. Rotate adds a new signing key; older keys keep
//     verifying until Retire. Keys persist as PKCS#8 PEM files (0600) in a key
//     directory, which is what replicas share: each re-reads it (Reload), and
//     a new key verifies at once but signs only once it is older than the
//     publish delay (WithPublishDelay), by when every replica has read it.
//   - The Docker token flow: TokenHandler serves GET /auth/token, granting only
//     what a Policy allows; BearerAuthorizer checks bearer tokens on registry
//     requests and builds the WWW-Authenticate challenge.
//
// Nothing here logs; errors wrap the sentinels below, to be tested with
// errors.Is. Secrets never appear in error messages. A database that cannot
// serve requests for now (out of disk space, read-only, unreachable) comes
// as an error wrapping meta.ErrUnavailable and its cause; TokenHandler
// answers it 503, code UNAVAILABLE, with Retry-After and the cause.
package auth

import "errors"

var (
	// ErrUnauthenticated: the credentials (password or API token) are wrong,
	// or the account is unknown or disabled. Deliberately one error for all.
	ErrUnauthenticated = errors.New("auth: invalid credentials")
	// ErrNotFound: no such account or token.
	ErrNotFound = errors.New("auth: not found")
	// ErrExists: an account of that name already exists.
	ErrExists = errors.New("auth: already exists")
	// ErrInvalid: an argument (name, role, password, parameter) is not acceptable.
	ErrInvalid = errors.New("auth: invalid argument")
	// ErrInvalidToken: a JWT failed verification (signature, algorithm, kid,
	// issuer, audience or time).
	ErrInvalidToken = errors.New("auth: invalid token")
	// ErrUnauthorized: a request carries no bearer token or an invalid one.
	ErrUnauthorized = errors.New("auth: unauthorized")
	// ErrDenied: a valid bearer token does not grant the required actions.
	ErrDenied = errors.New("auth: access denied")
)
