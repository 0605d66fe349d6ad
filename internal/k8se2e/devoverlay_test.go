//go:build k8se2e

package k8se2e

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// The development overlay, as committed.
const devOverlay = "../../deploy/k8s/overlays/dev"

// testDevOverlay: the dev overlay applied to the real API server is
// self-contained: every object is admitted (PodSecurity enforces
// "restricted" in namespace faas), and the kubelet finds every Secret its
// pods read, so that the runtime is asked to create faasd with its node
// account's token and its share token, and the registry's init container
// with the database settings — where a missing Secret would leave them in
// CreateContainerConfigError. (The fake runtime runs nothing: the init
// containers never end, and the volume claims stay unbound without a
// provisioner, as deploy/k8s/README.md says.)
func testDevOverlay(t *testing.T, r *rig) {
	abs, err := filepath.Abs(devOverlay)
	if err != nil {
		t.Fatal(err)
	}
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", devOverlay, err)
	}
	// Namespaces first: everything else lives in one.
	res := m.Resources()
	for _, first := range []bool{true, false} {
		for _, o := range res {
			if (o.GetKind() == "Namespace") != first {
				continue
			}
			obj, err := o.Map()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.c.API.Create(r.ctx, obj); err != nil {
				t.Fatalf("%s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
			}
		}
	}
	faasd := r.awaitCreated(t, "faasd of the dev overlay", func(c Created) bool {
		return c.Namespace == "faas-node" && strings.HasPrefix(c.Pod, "faasd-") && c.Container == "faasd"
	})
	for k, want := range map[string]string{"FAAS_NODE_USER": "node1", "FAAS_NODE_TOKEN": "faas-dev-only-node-password",
		"FAAS_SHARE_TOKEN": "faas_dev-only-shares-token-published-in-the-rep0"} {
		if faasd.Env[k] != want {
			t.Errorf("faasd's %s = %q, want %q from the overlay's Secrets", k, faasd.Env[k], want)
		}
	}
	reg := r.awaitCreated(t, "the registry's first init container", func(c Created) bool {
		return c.Namespace == "faas" && strings.HasPrefix(c.Pod, "faas-registry-") && c.Container == "dev-node-account"
	})
	if !strings.HasPrefix(reg.Env["FAAS_DATABASE_URL"], "postgres://faas:") {
		t.Errorf("the registry's init container got FAAS_DATABASE_URL %q", reg.Env["FAAS_DATABASE_URL"])
	}
}

// awaitCreated waits until the runtime has been asked to create a
// container match accepts, and returns the request.
func (r *rig) awaitCreated(t *testing.T, what string, match func(Created) bool) Created {
	t.Helper()
	var got *Created
	err := poll(r.ctx, waitTimeout, what+" created by the runtime", func() (bool, error) {
		c, err := r.lastCreated(match)
		got = c
		return c != nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return *got
}
