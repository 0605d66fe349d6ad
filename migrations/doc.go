// Package migrations holds the registry's PostgreSQL schema as ordered SQL
// migrations, embedded into the registry binary and applied at start.
//
// The migrations are tern (github.com/jackc/tern/v2) files named
// NNN_description.sql in this directory, numbered from 001 without gaps. A
// file may hold a down part after the line
//
//	---- create above / drop below ----
//
// Never edit a migration that has been released: add a new file. tern
// evaluates every file as a text/template, so a literal "{{" must be escaped.
//
// [Apply] (one connection) and [ApplyPool] (a pgxpool) bring a database up to
// [Latest]. Both are safe to run repeatedly and from several registry
// replicas at once: the whole run holds a PostgreSQL session advisory lock
// ([LockKey]), and tern records the version in [VersionTable], so a replica
// that waited for the lock finds the schema current and does nothing. Each
// migration runs in its own transaction.
package migrations
