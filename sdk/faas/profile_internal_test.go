package faas

import (
	"testing"

	"github.com/fpga-faas/faas/sdk/agentapi/session"
)

// BenchmarkProfileRecord is the SDK's profiling work at a job's completion
// (its clock reading included), the part of the profiling overhead that
// services/agent/server's BenchmarkJobRoundTrip against
// BenchmarkJobRoundTripUnprofiled measures end to end.
func BenchmarkProfileRecord(b *testing.B) {
	var p profiles
	j := &Job{submitted: clock()}
	cp := session.Completion{QueueNS: 5, EngineNS: 6}
	for range b.N {
		p.record(j, cp, false)
	}
}
