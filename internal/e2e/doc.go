// Package e2e holds no code, only an end-to-end test of the platform with
// every component in its own process: the registry on PostgreSQL and MinIO,
// faasd on simulated boards, and the hdk and faas command-line tools, all
// built from this module by the test itself.
//
// The test walks the data flows of docs/ARCHITECTURE.md from an ISV's push
// to a tenant's clear: the ISV pushes and signs the reference images (one of
// them sealed), validation countersigns them, a tenant subscribes, loads
// both with `faas load`, sees them with `faas status` and clears them with
// `faas clear`, after which the chips' DDR reads back zero; a tenant without
// a subscription is refused with the not-entitled exit code.
//
// TestDemo runs `make demo` in a fresh clone of the committed HEAD with HOME
// moved, which proves that the repository stands alone.
//
// It needs PostgreSQL and MinIO (see internal/testenv): without them it is
// skipped, or fails when CI=true.
package e2e
