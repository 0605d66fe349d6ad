//go:build k8se2e

package k8se2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fpga-faas/faas/internal/publish"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
	"github.com/fpga-faas/faas/services/registry/validation"
)

// The example every operator tries first, as committed.
const exampleManifest = "../../deploy/k8s/examples/inference/inference.yaml"

// sharesUser is the operator's account that loads engines for shares.
const sharesUser = "shares"

// testFirstPod: with faasd offering the shares of empty chips
// (--share-image), the inference example is scheduled on a node whose
// chips hold no engine. While the account that loads the engine is not
// entitled to it, the pod's container waits with the load's reason, which
// says what to do; once the account subscribes, the kubelet's next try
// loads the engine onto the pod's chip and the pod runs. When the pod is
// gone the engine is cleared after --share-idle.
func testFirstPod(t *testing.T, r *rig) {
	img, token := r.publishAliDNN(t)
	tokFile := filepath.Join(r.n.Dir, "shares.token")
	if err := os.WriteFile(tokFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.n.StopFaasd()
	r.n.SetFaasdFlags("--share-image", img.Ref, "--share-token-file", tokFile, "--share-idle", "5s")
	if err := r.n.StartFaasd(r.ctx); err != nil {
		t.Fatal(err)
	}
	// two-chips holds board 1; the shares of slots 0 and 1 are offered.
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 8})

	p := examplePod(t)
	if err := r.c.API.CreatePod(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	msg := r.waitWaiting(t, p.Name, "could not load the AliDNN engine")
	if !strings.Contains(msg, "no entitlement") {
		t.Errorf("the waiting container's message does not say what is missing: %q", msg)
	}
	t.Logf("%s waiting: %s", p.Name, msg)

	r.subscribe(t, img.Listing)
	r.awaitRunning(t, p.Name)
	slot, err := strconv.Atoi(r.slotsOf(t, p.Name))
	if err != nil || slot > 1 {
		t.Fatalf("FAAS_SLOTS %q, want slot 0 or 1 (two-chips holds 2 and 3)", r.slotsOf(t, p.Name))
	}
	s := r.slot(t, slot)
	if s.State != agentapi.Loaded || s.Tenant != sharesUser || s.Role == nil || s.Role.Name != "alidnn" {
		t.Errorf("slot %d with the example running: %+v, want the AliDNN engine loaded by %s", slot, s, sharesUser)
	}

	r.remove(t, p.Name)
	err = poll(r.ctx, waitTimeout, "the idle engine cleared", func() (bool, error) {
		return logCount(r.n.FaasdLog(), "cleared an idle engine loaded for shares") > 0, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.slot(t, slot); s.State != agentapi.Cleared {
		t.Errorf("slot %d after the idle engine was cleared: %s", slot, s.State)
	}
	r.waitAllocatable(t, counts{resChip: 4, resBoard: 1, resShare: 8})
}

// examplePod is a pod of the inference example's Deployment, its template
// unchanged but for its probes: the fake runtime runs no process to probe.
func examplePod(t *testing.T) *corev1.Pod {
	t.Helper()
	b, err := os.ReadFile(exampleManifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var d appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &d); err != nil {
			t.Fatalf("%s: %v", exampleManifest, err)
		}
		if d.Kind != "Deployment" {
			continue
		}
		spec := d.Spec.Template.Spec
		for i := range spec.Containers {
			spec.Containers[i].ReadinessProbe, spec.Containers[i].LivenessProbe = nil, nil
		}
		return &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: "default", Labels: d.Spec.Template.Labels},
			Spec:       spec,
		}
	}
	t.Fatalf("%s holds no Deployment", exampleManifest)
	return nil
}

// publishAliDNN publishes the AliDNN image as ISV acme and makes the
// shares account, not yet subscribed; it returns the image and an API
// token of the account.
func (r *rig) publishAliDNN(t *testing.T) (publish.Image, string) {
	t.Helper()
	for _, u := range []struct{ name, role string }{{"acme", "isv"}, {sharesUser, "tenant"}} {
		if _, err := r.n.run(r.ctx, nodePassword+"\n", "users", "add", u.name, "--role", u.role); err != nil {
			t.Fatal(err)
		}
	}
	recipient, err := os.ReadFile(filepath.Join(r.n.Dir, "platform-keys", validation.RecipientPubFile))
	if err != nil {
		t.Fatal(err)
	}
	img, err := publish.AliDNN(r.ctx, publish.ISV{URL: registryURL, User: "acme", Password: nodePassword, Recipient: recipient})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := r.account(t, sharesUser).CreateToken(r.ctx, registryapi.NewToken{Name: "faasd shares"})
	if err != nil {
		t.Fatal(err)
	}
	return img, tok.Secret
}

func (r *rig) account(t *testing.T, user string) *registryclient.Client {
	t.Helper()
	c, err := registryclient.New(registryURL, registryclient.WithBasicAuth(user, nodePassword))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// subscribe subscribes the shares account to listing.
func (r *rig) subscribe(t *testing.T, listing string) {
	t.Helper()
	if err := r.account(t, sharesUser).Do(r.ctx, "POST", "/listings/"+listing+"/subscribe", nil, nil); err != nil {
		t.Fatal(err)
	}
}

// slot is faasd's record of slot i, as the operator sees it.
func (r *rig) slot(t *testing.T, i int) agentapi.Slot {
	t.Helper()
	c, err := faas.Dial(r.ctx, r.n.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.Slot(r.ctx, i)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// waitWaiting waits until the pod's container is waiting with a message
// holding want, and returns the message.
func (r *rig) waitWaiting(t *testing.T, name, want string) string {
	t.Helper()
	var msg string
	err := poll(r.ctx, waitTimeout, "pod "+name+" waiting with "+want, func() (bool, error) {
		p, err := r.c.API.Pod(r.ctx, "default", name)
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil {
				msg = w.Reason + ": " + w.Message
			}
		}
		return strings.Contains(msg, want), nil
	})
	if err != nil {
		t.Fatalf("%v; last message %q", err, msg)
	}
	return msg
}
