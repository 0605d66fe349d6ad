package k8s_test

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// TestModelServer: the model server asks for one whole chip, which brings
// faasd's socket through the device plugin (no host path of its own),
// probes the protocol's liveness and readiness, and is reached through a
// Service; the pool variant asks for no chip and attaches instead, with the
// tenant's registry token.
func TestModelServer(t *testing.T) {
	chip := corev1.ResourceName("faas.dev/chip")
	for _, dir := range []string{"examples/modelserver", "examples/modelserver-pool"} {
		objs := renderDir(t, dir)
		d := find[*appsv1.Deployment](t, objs, "", "modelserver")
		spec := d.Spec.Template.Spec
		c := spec.Containers[0]
		if len(hostPaths(spec)) != 0 {
			t.Errorf("%s: host paths mounted: %v", dir, hostPaths(spec))
		}
		for _, p := range []struct {
			probe *corev1.Probe
			path  string
		}{{c.LivenessProbe, "/v2/health/live"}, {c.ReadinessProbe, "/v2/health/ready"}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.StrVal != "http" {
				t.Errorf("%s: probe %+v, want GET %s on port http", dir, p.probe, p.path)
			}
		}
		if len(c.Args) == 0 || c.Args[0] != "modelserver" || !slices.Contains(c.Args, "-repo") {
			t.Errorf("%s: args %q", dir, c.Args)
		}
		svc := find[*corev1.Service](t, objs, "", "modelserver")
		if len(svc.Spec.Ports) != 2 {
			t.Errorf("%s: Service ports %+v, want http and grpc", dir, svc.Spec.Ports)
		}
		q, asked := c.Resources.Limits[chip]
		attach := slices.Index(c.Args, "-attach")
		switch dir {
		case "examples/modelserver":
			if !asked || !q.Equal(resource.MustParse("1")) || attach >= 0 {
				t.Errorf("%s: chip limit %v (%v), args %q; want one chip and no -attach", dir, q.String(), asked, c.Args)
			}
		default:
			if asked || attach < 0 || attach+1 == len(c.Args) || c.Args[attach+1] != "acme/alidnn-dual" {
				t.Errorf("%s: chip limit %v (%v), args %q; want no chip and -attach acme/alidnn-dual", dir, q.String(), asked, c.Args)
			}
			i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "FAAS_TOKEN" })
			if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.SecretKeyRef == nil {
				t.Errorf("%s: FAAS_TOKEN not from a Secret: %+v", dir, c.Env)
			}
		}
	}
}
