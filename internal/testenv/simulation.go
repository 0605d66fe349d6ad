package testenv

import "testing"

// FullNetwork marks a test that simulates whole ImageNet-scale networks on
// the AliDNN engine model: single-goroutine arithmetic, tens of billions of
// operations, which the race detector would slow ten times over and grow
// to many GiB of shadow memory without checking anything. Under -race it
// skips, saying so; `make test` runs these tests (named TestNet…) again
// without -race, so CI always runs them.
func FullNetwork(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("a whole-network simulation: make test runs it without -race (its net-tests step)")
	}
}
