package k8s_test

import (
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

const faasd = "DaemonSet faas-node/faasd"

// kustomizations are every kustomization here, with what each may do.
var kustomizations = map[string]expect{
	"base": {
		registry: true,
		external: []string{"Secret faas/faas-registry", "Secret faas/faas-registry-jwt", "Secret faas/faas-platform-keys",
			"Secret faas-node/faasd-node", "ConfigMap faas-node/faas-trust"},
		asRoot:     []string{faasd},
		privileged: []string{faasd},
	},
	"overlays/dev": {
		registry: true,
		// The node account's token exists only once the registry runs.
		external: []string{"Secret faas-node/faasd-node"},
		asRoot:   []string{faasd},
	},
	"examples/inference": {},
	"examples/modelserver": {
		external: []string{"Secret /modelserver-tokens"},
	},
	"examples/modelserver-pool": {
		external: []string{"Secret /modelserver-registry-token", "Secret /modelserver-tokens"},
	},
}

func renderDir(t *testing.T, dir string) []runtime.Object {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := render(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// TestEveryKustomizationChecked keeps a new overlay or example from going
// unchecked.
func TestEveryKustomizationChecked(t *testing.T) {
	found, err := filepath.Glob("*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob("*/*/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(found, more...) {
		if _, ok := kustomizations[filepath.Dir(f)]; !ok {
			t.Errorf("%s is not in kustomizations", filepath.Dir(f))
		}
	}
}

func TestManifests(t *testing.T) {
	for dir, want := range kustomizations {
		t.Run(dir, func(t *testing.T) {
			objs := renderDir(t, dir)
			if len(workloads(objs)) == 0 {
				t.Fatal("no workloads")
			}
			for _, err := range check(objs, want) {
				t.Error(err)
			}
		})
	}
}

func find[T runtime.Object](t *testing.T, objs []runtime.Object, namespace, name string) T {
	t.Helper()
	for _, obj := range objs {
		if o, ok := obj.(T); ok {
			if m := any(o).(interface {
				GetNamespace() string
				GetName() string
			}); m.GetNamespace() == namespace && generatedFrom(m.GetName(), name) {
				return o
			}
		}
	}
	var zero T
	t.Fatalf("no %T %s/%s", zero, namespace, name)
	return zero
}

// generatedFrom: got is name, or name with the suffix kustomize's
// generators add ("-" and a 10-character hash).
func generatedFrom(got, name string) bool {
	return got == name || len(got) == len(name)+11 && strings.HasPrefix(got, name+"-")
}

func env(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func hostPaths(spec corev1.PodSpec) map[string]string {
	byVolume := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			byVolume[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]string{} // host path → mount path
	for _, m := range spec.Containers[0].VolumeMounts {
		if p, ok := byVolume[m.Name]; ok {
			mounted[p] = m.MountPath
		}
	}
	return mounted
}

// TestRegistryMetrics: the metrics listener is reachable in the cluster, on
// a port of its own that Prometheus is told to scrape.
func TestRegistryMetrics(t *testing.T) {
	for _, dir := range []string{"base", "overlays/dev"} {
		d := find[*appsv1.Deployment](t, renderDir(t, dir), registryNamespace, registryName)
		c := d.Spec.Template.Spec.Containers[0]
		if got := env(c, "FAAS_METRICS_LISTEN"); got != ":5001" {
			t.Errorf("%s: FAAS_METRICS_LISTEN=%q, want :5001", dir, got)
		}
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 5001 }) {
			t.Errorf("%s: no container port metrics 5001: %v", dir, c.Ports)
		}
		a := d.Spec.Template.Annotations
		if a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "5001" || a["prometheus.io/path"] != "/metrics" {
			t.Errorf("%s: scrape annotations %v", dir, a)
		}
	}
}

// TestFaasd: on real boards faasd reaches the host's devices, sysfs (read
// only), the kubelet's device plugin directory and shares its socket
// directory; in the dev overlay it runs simulated boards and has none of
// the host's devices.
func TestFaasd(t *testing.T) {
	base := find[*appsv1.DaemonSet](t, renderDir(t, "base"), "faas-node", "faasd").Spec.Template.Spec
	want := map[string]string{"/dev": "/dev", "/sys": "/sys", "/run/faasd": "/run/faasd",
		"/var/lib/kubelet/device-plugins": "/var/lib/kubelet/device-plugins", "/run/faas/pods": "/run/faas/pods",
		"/var/lib/kubelet/pod-resources": "/var/lib/kubelet/pod-resources"}
	got := hostPaths(base)
	for host, mount := range want {
		if got[host] != mount {
			t.Errorf("base: host %s mounted at %q, want %s", host, got[host], mount)
		}
	}
	if !slices.ContainsFunc(base.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/sys" && m.ReadOnly }) {
		t.Error("base: /sys is not mounted read-only")
	}

	dev := find[*appsv1.DaemonSet](t, renderDir(t, "overlays/dev"), "faas-node", "faasd").Spec.Template.Spec
	c := dev.Containers[0]
	if i := slices.Index(c.Args, "--sim"); i < 0 || i+1 == len(c.Args) || c.Args[i+1] != "2" {
		t.Errorf("dev: faasd args %q, want --sim 2", c.Args)
	}
	for _, spec := range []corev1.PodSpec{base, dev} {
		c := spec.Containers[0]
		if !slices.Contains(c.Args, "--device-plugin") {
			t.Errorf("faasd args %q: no --device-plugin", c.Args)
		}
		// The pool reaches the node on its own IP, at what it advertises.
		i := slices.Index(c.Args, "--advertise")
		hasIP := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "NODE_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.hostIP"
		})
		hostPort := slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 8443 && p.HostPort == 8443 })
		if !slices.Contains(c.Args, "--listen") || i < 0 || i+1 == len(c.Args) || c.Args[i+1] != "https://$(NODE_IP):8443" || !hasIP || !hostPort {
			t.Errorf("faasd does not serve remote attach on the node's IP: args %q, ports %+v", c.Args, c.Ports)
		}
	}
	got = hostPaths(dev)
	for _, host := range []string{"/dev", "/sys"} {
		if _, ok := got[host]; ok {
			t.Errorf("dev: host %s mounted", host)
		}
	}
	if got["/run/faasd"] != "/run/faasd" {
		t.Errorf("dev: /run/faasd not shared: %v", got)
	}
	if c.SecurityContext == nil || isTrue(c.SecurityContext.Privileged) {
		t.Error("dev: faasd is privileged")
	}
}

// TestDevKeys: the dev overlay's key Secrets hold keys as the registry
// writes them into an empty key directory: a JWT signing key (Ed25519,
// PKCS #8) in a file named by its kid, and the platform's signing and
// sealing key pairs; and faasd trusts that platform signing key. (This
// package may not import the registry's loaders: see internal/layout.)
func TestDevKeys(t *testing.T) {
	objs := renderDir(t, "overlays/dev")
	jwt := find[*corev1.Secret](t, objs, "faas", "faas-registry-jwt")
	if len(jwt.Data) != 1 {
		t.Errorf("faas-registry-jwt holds %d files, want one key", len(jwt.Data))
	}
	for name, b := range jwt.Data {
		key, ok := parsePrivate(t, name, b).(ed25519.PrivateKey)
		if !ok {
			t.Errorf("%s: not an Ed25519 key", name)
			continue
		}
		sum := sha256.Sum256(key.Public().(ed25519.PublicKey))
		if kid := hex.EncodeToString(sum[:16]); name != kid+".pem" {
			t.Errorf("JWT key file %s, want %s.pem (its kid)", name, kid)
		}
	}

	platform := find[*corev1.Secret](t, objs, "faas", "faas-platform-keys")
	if len(platform.Data) != 4 {
		t.Errorf("faas-platform-keys holds %d files, want 4", len(platform.Data))
	}
	for _, pair := range []string{"platform-signing", "platform-seal"} {
		priv := parsePrivate(t, pair+".key", platform.Data[pair+".key"])
		block, _ := pem.Decode(platform.Data[pair+".pub"])
		if block == nil {
			t.Errorf("%s.pub: no PEM block", pair)
			continue
		}
		pub, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			t.Errorf("%s.pub: %v", pair, err)
			continue
		}
		if !pub.(interface{ Equal(crypto.PublicKey) bool }).Equal(priv.(interface{ Public() crypto.PublicKey }).Public()) {
			t.Errorf("%s.pub is not the public half of %s.key", pair, pair)
		}
	}

	trust := find[*corev1.ConfigMap](t, objs, "faas-node", "faas-trust")
	pub := platform.Data["platform-signing.pub"]
	if len(pub) == 0 || trust.Data["platform-signing.pub"] != string(pub) {
		t.Error("faas-trust platform-signing.pub differs from the platform's")
	}
}

// parsePrivate reads one PKCS #8 "PRIVATE KEY" PEM block.
func parsePrivate(t *testing.T, name string, b []byte) any {
	t.Helper()
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "PRIVATE KEY" {
		t.Fatalf("%s: no PRIVATE KEY PEM block", name)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return key
}

// TestDevShares: the dev overlay's faasd offers shares of empty chips
// (--share-image), loading the engine with the token the registry's init
// container gives the "shares" account: the same published token on both
// sides, and one the registry accepts.
func TestDevShares(t *testing.T) {
	objs := renderDir(t, "overlays/dev")
	c := find[*appsv1.DaemonSet](t, objs, "faas-node", "faasd").Spec.Template.Spec.Containers[0]
	if i := slices.Index(c.Args, "--share-image"); i < 0 || i+1 == len(c.Args) || !strings.HasSuffix(c.Args[i+1], "/acme/alidnn:1.0.0") {
		t.Errorf("dev: faasd args %q, want --share-image …/acme/alidnn:1.0.0", c.Args)
	}
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "FAAS_SHARE_TOKEN" })
	if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
		t.Fatalf("dev: faasd has no FAAS_SHARE_TOKEN from a Secret: %+v", c.Env)
	}
	ref := c.Env[i].ValueFrom.SecretKeyRef
	faasd := find[*corev1.Secret](t, objs, "faas-node", ref.Name)
	reg := find[*corev1.Secret](t, objs, "faas", "faas-dev-shares")
	tok := string(faasd.Data[ref.Key]) + faasd.StringData[ref.Key]
	if want := string(reg.Data["token"]) + reg.StringData["token"]; tok == "" || tok != want {
		t.Errorf("faasd's share token %q, the registry's init container's %q", tok, want)
	}
	// The registry's form of an API token (services/registry/auth), which
	// its users add --token-file insists on.
	if !regexp.MustCompile(`^faas_[A-Za-z0-9_-]{43}$`).MatchString(tok) {
		t.Errorf("the dev share token %q is not of an API token's form", tok)
	}
	d := find[*appsv1.Deployment](t, objs, registryNamespace, registryName)
	if !slices.ContainsFunc(d.Spec.Template.Spec.InitContainers, func(c corev1.Container) bool {
		return slices.Contains(c.Args, "shares") && slices.Contains(c.Args, "--token-file")
	}) {
		t.Error("dev: no init container of the registry creates the shares account with its token")
	}
}
