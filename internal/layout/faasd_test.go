package layout

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

// TestFaasdLinksNoServer checks what the node agent's binary links, not
// only what its packages import: a registry server package reached through
// any chain of imports (an SDK package importing a server one, say) would
// put the registry's HTTP framework, database driver and stores on every
// FPGA host.
func TestFaasdLinksNoServer(t *testing.T) {
	root, module := moduleRoot(t)
	cmd := exec.Command("go", "list", "-deps", "./services/cmd/faasd")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./services/cmd/faasd: %v\n%s", err, stderr.Bytes())
	}
	forbidden := []string{"github.com/labstack/echo", "github.com/jackc/pgx", module + "/services/registry"}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps listed %d packages; want faasd's dependencies", len(deps))
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("faasd links %s (under %s): the node agent must reach the registry only through sdk/registryapi's contract and client", d, f)
			}
		}
	}
}
