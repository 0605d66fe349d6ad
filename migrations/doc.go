// Package migrations holds the registry's PostgreSQL schema as ordered SQL
// migrations, embedded into the registry binary and applied at start.
package migrations
