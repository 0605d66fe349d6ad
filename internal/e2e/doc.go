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
// TestSoak is the accelerator pool's chaos soak (soak_test.go): tenants
// attach, use, detach and vanish while faasd, a registry replica and
// PostgreSQL are killed or restarted at random; then the pool's invariants
// are checked. FAAS_SOAK sets its length (60s by default; `make soak`
// runs 10m), FAAS_SOAK_SEED replays a run's choices.
//
// TestDemo runs `make demo` in a fresh clone of the committed HEAD with HOME
// moved, which proves that the repository stands alone.
//
// It needs PostgreSQL and MinIO (see internal/testenv): without them it is
// skipped, or fails when CI=true.
package e2e
