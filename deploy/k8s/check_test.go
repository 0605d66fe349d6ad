package k8s_test

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// scheme holds the API groups a manifest may use; any other kind fails to
// decode.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, rbacv1.AddToScheme, schedulingv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// strict decodes as the API server's strict field validation does: unknown
// and duplicate fields are errors, and field names match case-sensitively.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// render builds the kustomization in dir and decodes every object it makes.
func render(fsys filesys.FileSystem, dir string) ([]runtime.Object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var objs []runtime.Object
	var errs []error
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err))
			continue
		}
		obj, _, err := strict.Decode(y, nil, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s %s: %w", r.GetKind(), r.GetName(), err))
			continue
		}
		objs = append(objs, obj)
	}
	return objs, errors.Join(errs...)
}

// expect is what a kustomization may do that the checks otherwise refuse,
// and what it must hold.
type expect struct {
	// registry: it must hold the registry Deployment faas/faas-registry.
	registry bool
	// external lists the Secrets and ConfigMaps ("Secret ns/name") its
	// workloads use but leave to the operator to create; every other one
	// must be among its objects.
	external []string
	// asRoot and privileged list the workloads ("DaemonSet ns/name") that
	// may run as root, or privileged.
	asRoot, privileged []string
}

// workload is an object that makes pods.
type workload struct {
	id          string // "Kind namespace/name"
	kind        string
	namespace   string
	name        string
	longRunning bool
	replicas    int32 // -1: one per node
	pod         corev1.PodTemplateSpec
}

func workloads(objs []runtime.Object) []workload {
	var ws []workload
	add := func(kind string, m metav1.ObjectMeta, long bool, replicas *int32, pod corev1.PodTemplateSpec) {
		n := int32(1) // the API's default
		if replicas != nil {
			n = *replicas
		}
		ws = append(ws, workload{id: kind + " " + m.Namespace + "/" + m.Name, kind: kind, namespace: m.Namespace,
			name: m.Name, longRunning: long, replicas: n, pod: pod})
	}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			add("Deployment", o.ObjectMeta, true, o.Spec.Replicas, o.Spec.Template)
		case *appsv1.StatefulSet:
			add("StatefulSet", o.ObjectMeta, true, o.Spec.Replicas, o.Spec.Template)
		case *appsv1.DaemonSet:
			n := int32(-1)
			add("DaemonSet", o.ObjectMeta, true, &n, o.Spec.Template)
		case *appsv1.ReplicaSet:
			add("ReplicaSet", o.ObjectMeta, true, o.Spec.Replicas, o.Spec.Template)
		case *corev1.ReplicationController:
			if o.Spec.Template != nil {
				add("ReplicationController", o.ObjectMeta, true, o.Spec.Replicas, *o.Spec.Template)
			}
		case *corev1.Pod:
			long := o.Spec.RestartPolicy == "" || o.Spec.RestartPolicy == corev1.RestartPolicyAlways
			add("Pod", o.ObjectMeta, long, nil, corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec})
		case *batchv1.Job:
			add("Job", o.ObjectMeta, false, nil, o.Spec.Template)
		case *batchv1.CronJob:
			add("CronJob", o.ObjectMeta, false, nil, o.Spec.JobTemplate.Spec.Template)
		}
	}
	return ws
}

// check returns everything wrong with the objects of one kustomization.
func check(objs []runtime.Object, want expect) []error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	ws := workloads(objs)
	for _, w := range ws {
		checkPod(w, want, fail)
	}
	checkRegistry(objs, ws, want, fail)
	checkServices(objs, ws, fail)
	checkRefs(objs, ws, want, fail)
	return errs
}

type failFunc func(format string, args ...any)

func checkPod(w workload, want expect, fail failFunc) {
	spec := w.pod.Spec
	type ctr struct {
		corev1.Container
		init bool
	}
	var cs []ctr
	for _, c := range spec.InitContainers {
		cs = append(cs, ctr{c, true})
	}
	for _, c := range spec.Containers {
		cs = append(cs, ctr{c, false})
	}
	for _, c := range cs {
		where := fmt.Sprintf("%s container %s", w.id, c.Name)
		if err := pinned(c.Image); err != nil {
			fail("%s: image %q: %v", where, c.Image, err)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				fail("%s: no %s request", where, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				fail("%s: no %s limit", where, r)
			}
		}
		sidecar := c.init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		if w.longRunning && (!c.init || sidecar) {
			if c.ReadinessProbe == nil {
				fail("%s: no readiness probe", where)
			}
			if c.LivenessProbe == nil {
				fail("%s: no liveness probe", where)
			}
		}
		checkSecurity(w, c.Container, want, where, fail)
	}
}

func checkSecurity(w workload, c corev1.Container, want expect, where string, fail failFunc) {
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	psc := w.pod.Spec.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if isTrue(sc.Privileged) {
		if !slices.Contains(want.privileged, w.id) {
			fail("%s: privileged", where)
		}
	} else {
		// A privileged container gets every capability and no seccomp
		// filter whatever it asks for, so these only count without.
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			fail("%s: allowPrivilegeEscalation is not false", where)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			fail("%s: does not drop ALL capabilities", where)
		}
		seccomp := psc.SeccompProfile
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type == corev1.SeccompProfileTypeUnconfined {
			fail("%s: no seccomp profile (want RuntimeDefault)", where)
		}
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		fail("%s: root file system not read-only", where)
	}
	nonRoot := psc.RunAsNonRoot
	if sc.RunAsNonRoot != nil {
		nonRoot = sc.RunAsNonRoot
	}
	if !isTrue(nonRoot) && !slices.Contains(want.asRoot, w.id) {
		fail("%s: may run as root (runAsNonRoot not set)", where)
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

var (
	digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	// releaseRE: a tag naming one release: a version with at least major
	// and minor (v1.2, 15.18, 0.1.0-dev) or a dated release (MinIO's).
	releaseRE = regexp.MustCompile(`^(v?\d+\.\d+([.+_-].*)?|RELEASE\.\d{4}-\d{2}-\d{2}T[0-9-]+Z)$`)
)

// pinned says why an image reference may name another image on the next
// pull: no tag, latest, or a floating tag (a bare major version such as
// postgres:15, or a word such as stable or dev). A digest pins any reference.
func pinned(ref string) error {
	if name, digest, ok := strings.Cut(ref, "@"); ok {
		if name == "" || !digestRE.MatchString(digest) {
			return errors.New("malformed digest reference")
		}
		return nil
	}
	// The tag follows the last colon after the last slash: a registry host
	// may carry a port.
	i := strings.LastIndex(ref, ":")
	if i < 0 || i < strings.LastIndex(ref, "/") {
		return errors.New("no tag (pulls latest)")
	}
	switch tag := ref[i+1:]; {
	case tag == "latest":
		return errors.New("tag latest")
	case !releaseRE.MatchString(tag):
		return fmt.Errorf("floating tag %q: name a release (major.minor[.patch]) or a digest", tag)
	}
	return nil
}

const (
	registryNamespace = "faas"
	registryName      = "faas-registry"
)

func checkRegistry(objs []runtime.Object, ws []workload, want expect, fail failFunc) {
	i := slices.IndexFunc(ws, func(w workload) bool {
		return w.kind == "Deployment" && w.namespace == registryNamespace && w.name == registryName
	})
	if i < 0 {
		if want.registry {
			fail("no Deployment %s/%s", registryNamespace, registryName)
		}
		return
	}
	w := ws[i]
	if w.replicas < 2 {
		fail("%s: %d replicas, want 2 or more", w.id, w.replicas)
	}
	var pdb *policyv1.PodDisruptionBudget
	for _, obj := range objs {
		p, ok := obj.(*policyv1.PodDisruptionBudget)
		if !ok || p.Namespace != w.namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
		if err != nil {
			fail("PodDisruptionBudget %s/%s: %v", p.Namespace, p.Name, err)
			continue
		}
		if sel.Matches(labels.Set(w.pod.Labels)) {
			pdb = p
		}
	}
	if pdb == nil {
		fail("%s: no PodDisruptionBudget selects it", w.id)
	} else if n, err := intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, int(w.replicas), true); pdb.Spec.MinAvailable == nil || err != nil || n < 1 {
		fail("%s: PodDisruptionBudget %s does not keep a replica up (want minAvailable 1 or more)", w.id, pdb.Name)
	}
	for _, c := range w.pod.Spec.Containers {
		if c.Name != "registry" {
			continue
		}
		for _, p := range []struct {
			kind, path string
			probe      *corev1.Probe
		}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
			if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path {
				fail("%s: %s probe is not GET %s", w.id, p.kind, p.path)
			}
		}
	}
}

// checkServices: every Service with a selector selects some workload in its
// namespace, and its named target ports are ports of those pods.
func checkServices(objs []runtime.Object, ws []workload, fail failFunc) {
	for _, obj := range objs {
		s, ok := obj.(*corev1.Service)
		if !ok || len(s.Spec.Selector) == 0 {
			continue // no selector: endpoints managed by hand
		}
		sel := labels.SelectorFromSet(s.Spec.Selector)
		ports := map[string]bool{}
		matched := false
		for _, w := range ws {
			if w.namespace != s.Namespace || !sel.Matches(labels.Set(w.pod.Labels)) {
				continue
			}
			matched = true
			for _, c := range w.pod.Spec.Containers {
				for _, p := range c.Ports {
					ports[p.Name] = true
				}
			}
		}
		if !matched {
			fail("Service %s/%s: selector %v matches no workload", s.Namespace, s.Name, s.Spec.Selector)
			continue
		}
		for _, p := range s.Spec.Ports {
			if p.TargetPort.Type == intstr.String && !ports[p.TargetPort.StrVal] {
				fail("Service %s/%s: target port %q is no container port of the pods it selects", s.Namespace, s.Name, p.TargetPort.StrVal)
			}
		}
	}
}

// checkRefs: every Secret and ConfigMap a pod needs (optional ones aside) is
// made by the kustomization or expected from the operator.
func checkRefs(objs []runtime.Object, ws []workload, want expect, fail failFunc) {
	have := map[string]bool{}
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.Secret:
			have["Secret "+o.Namespace+"/"+o.Name] = true
		case *corev1.ConfigMap:
			have["ConfigMap "+o.Namespace+"/"+o.Name] = true
		}
	}
	for _, w := range ws {
		need := func(kind, name string, optional *bool) {
			key := kind + " " + w.namespace + "/" + name
			if !isTrue(optional) && !have[key] && !slices.Contains(want.external, key) {
				fail("%s: needs %s, which is neither made here nor expected from the operator", w.id, key)
			}
		}
		spec := w.pod.Spec
		for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					need("Secret", r.Name, r.Optional)
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					need("ConfigMap", r.Name, r.Optional)
				}
			}
			for _, e := range c.EnvFrom {
				if r := e.SecretRef; r != nil {
					need("Secret", r.Name, r.Optional)
				}
				if r := e.ConfigMapRef; r != nil {
					need("ConfigMap", r.Name, r.Optional)
				}
			}
		}
		for _, v := range spec.Volumes {
			if s := v.Secret; s != nil {
				need("Secret", s.SecretName, s.Optional)
			}
			if c := v.ConfigMap; c != nil {
				need("ConfigMap", c.Name, c.Optional)
			}
			if p := v.Projected; p != nil {
				for _, src := range p.Sources {
					if s := src.Secret; s != nil {
						need("Secret", s.Name, s.Optional)
					}
					if c := src.ConfigMap; c != nil {
						need("ConfigMap", c.Name, c.Optional)
					}
				}
			}
		}
	}
}
