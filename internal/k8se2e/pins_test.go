package k8se2e

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestOnePin: components/go.mod is the one place the versions are pinned.
// k8s.io/kubernetes requires its staging modules at v0.0.0 and reaches
// them through replace lines of its own, which a dependent module cannot
// inherit: every replace must name the published v0.MINOR.PATCH of the
// pinned v1.MINOR.PATCH, so that a bump of k8s.io/kubernetes alone fails
// here. (No network: a plain parse of the file.)
func TestOnePin(t *testing.T) {
	b, err := os.ReadFile("components/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	k8s := regexp.MustCompile(`(?m)^\s*k8s\.io/kubernetes v1\.(\d+\.\d+)(\s*// indirect)?\s*$`).FindStringSubmatch(mod)
	if k8s == nil {
		t.Fatal("components/go.mod requires no k8s.io/kubernetes v1.x.y")
	}
	if !regexp.MustCompile(`(?m)^\s*go\.etcd\.io/etcd/server/v3 v3\.\d+\.\d+(\s*// indirect)?\s*$`).MatchString(mod) {
		t.Error("components/go.mod requires no go.etcd.io/etcd/server/v3 v3.x.y")
	}
	want := "v0." + k8s[1]
	replaces := regexp.MustCompile(`(?m)^\s*(k8s\.io/[a-z0-9-]+) => (k8s\.io/[a-z0-9-]+) (\S+)\s*$`).FindAllStringSubmatch(mod, -1)
	if len(replaces) < 20 {
		t.Fatalf("components/go.mod has %d replaces of staging modules, want one per staging module", len(replaces))
	}
	for _, r := range replaces {
		if r[1] != r[2] || r[3] != want {
			t.Errorf("replace %s => %s %s, want %s => %s %s", r[1], r[2], r[3], r[1], r[1], want)
		}
	}
	script, err := os.ReadFile("k8s-e2e.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{`"k8s.io/kubernetes"`, `"go.etcd.io/etcd/server/v3"`} {
		if !strings.Contains(string(script), m) {
			t.Errorf("k8s-e2e.sh does not read the version of %s from components/go.mod", m)
		}
	}
}
