//go:build race

package testenv

// raceEnabled reports whether the race detector instruments this build.
const raceEnabled = true
