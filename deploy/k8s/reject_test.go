package k8s_test

import (
	"errors"
	"strings"
	"testing"

	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// goodApp passes every check; each case of TestChecksReject breaks it in
// one place.
const goodApp = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: faas-registry
  namespace: faas
spec:
  replicas: 2
  selector:
    matchLabels: {app: registry}
  template:
    metadata:
      labels: {app: registry}
    spec:
      securityContext:
        runAsNonRoot: true
        seccompProfile: {type: RuntimeDefault}
      initContainers:
        - name: keys
          image: busybox:1.37.0
          command: ["true"]
          resources:
            requests: {cpu: 10m, memory: 16Mi}
            limits: {cpu: 100m, memory: 32Mi}
          securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
      containers:
        - name: registry
          image: fpga-faas/faas:0.1.0
          env:
            - name: FAAS_DATABASE_URL
              valueFrom:
                secretKeyRef: {name: faas-registry, key: FAAS_DATABASE_URL}
          ports:
            - {name: http, containerPort: 5000}
          readinessProbe:
            httpGet: {path: /readyz, port: http}
          livenessProbe:
            httpGet: {path: /healthz, port: http}
          resources:
            requests: {cpu: 250m, memory: 256Mi}
            limits: {cpu: "2", memory: 1Gi}
          securityContext:
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities: {drop: [ALL]}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: faas-registry
  namespace: faas
spec:
  minAvailable: 1
  selector:
    matchLabels: {app: registry}
---
apiVersion: v1
kind: Service
metadata:
  name: faas-registry
  namespace: faas
spec:
  selector: {app: registry}
  ports:
    - {name: http, port: 5000, targetPort: http}
`

var goodExpect = expect{registry: true, external: []string{"Secret faas/faas-registry"}}

// checkApp renders app as a kustomization and checks it.
func checkApp(t *testing.T, app string) error {
	t.Helper()
	fsys := filesys.MakeFsInMemory()
	for name, content := range map[string]string{
		"/app/kustomization.yaml": "resources: [app.yaml]\n",
		"/app/app.yaml":           app,
	} {
		if err := fsys.WriteFile(name, []byte(content)); err != nil {
			t.Fatal(err)
		}
	}
	objs, err := render(fsys, "/app")
	if err != nil {
		return err
	}
	return errors.Join(check(objs, goodExpect)...)
}

func TestChecksPassGoodApp(t *testing.T) {
	if err := checkApp(t, goodApp); err != nil {
		t.Fatal(err)
	}
}

func TestChecksReject(t *testing.T) {
	for _, tc := range []struct {
		name, old, new, want string
	}{
		{"no readiness probe", "          readinessProbe:\n            httpGet: {path: /readyz, port: http}\n", "",
			"container registry: no readiness probe"},
		{"no liveness probe", "          livenessProbe:\n            httpGet: {path: /healthz, port: http}\n", "",
			"container registry: no liveness probe"},
		{"readiness on TCP", "readinessProbe:\n            httpGet: {path: /readyz, port: http}", "readinessProbe:\n            tcpSocket: {port: http}",
			"readiness probe is not GET /readyz"},
		{"no memory limit", `limits: {cpu: "2", memory: 1Gi}`, `limits: {cpu: "2"}`,
			"container registry: no memory limit"},
		{"no cpu request", "requests: {cpu: 250m, memory: 256Mi}", "requests: {memory: 256Mi}",
			"container registry: no cpu request"},
		{"init container without limits", "            limits: {cpu: 100m, memory: 32Mi}\n", "",
			"container keys: no cpu limit"},
		{"latest", "fpga-faas/faas:0.1.0", "fpga-faas/faas:latest", "tag latest"},
		{"no tag", "fpga-faas/faas:0.1.0", "fpga-faas/faas", "no tag"},
		{"no tag, registry port", "fpga-faas/faas:0.1.0", "registry.local:5000/fpga-faas/faas", "no tag"},
		{"major version only", "busybox:1.37.0", "busybox:1", `floating tag "1"`},
		{"word tag", "fpga-faas/faas:0.1.0", "fpga-faas/faas:dev", `floating tag "dev"`},
		{"unknown field", "readinessProbe:", "readinesProbe:", "unknown field"},
		{"field in the wrong case", "readinessProbe:", "ReadinessProbe:", "unknown field"},
		{"unknown kind", "kind: PodDisruptionBudget", "kind: PodDisruptionBudjet", `no kind "PodDisruptionBudjet"`},
		{"one replica", "replicas: 2", "replicas: 1", "1 replicas, want 2 or more"},
		{"replicas left to the default", "  replicas: 2\n", "", "1 replicas, want 2 or more"},
		{"no disruption budget selects it", "  selector:\n    matchLabels: {app: registry}\n---\napiVersion: v1",
			"  selector:\n    matchLabels: {app: other}\n---\napiVersion: v1", "no PodDisruptionBudget selects it"},
		{"disruption budget of 0", "minAvailable: 1", "minAvailable: 0", "does not keep a replica up"},
		{"Service selects nothing", "selector: {app: registry}\n  ports:", "selector: {app: registy}\n  ports:",
			"matches no workload"},
		{"Service target port unknown", "targetPort: http}", "targetPort: https}", `target port "https" is no container port`},
		{"privileged", "{allowPrivilegeEscalation: false,", "{privileged: true, allowPrivilegeEscalation: false,",
			"container keys: privileged"},
		{"capabilities kept", "            capabilities: {drop: [ALL]}\n", "", "does not drop ALL capabilities"},
		{"writable root", "            readOnlyRootFilesystem: true\n", "            readOnlyRootFilesystem: false\n",
			"container registry: root file system not read-only"},
		{"may run as root", "        runAsNonRoot: true\n", "", "may run as root"},
		{"unconfined", "seccompProfile: {type: RuntimeDefault}", "seccompProfile: {type: Unconfined}", "no seccomp profile"},
		{"Secret nobody makes", "{name: faas-registry, key:", "{name: faas-registry-env, key:",
			"needs Secret faas/faas-registry-env, which is neither made here nor expected"},
		{"no registry", "  name: faas-registry\n  namespace: faas\nspec:\n  replicas",
			"  name: registry\n  namespace: faas\nspec:\n  replicas", "no Deployment faas/faas-registry"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if n := strings.Count(goodApp, tc.old); n != 1 {
				t.Fatalf("%q occurs %d times in goodApp, want once", tc.old, n)
			}
			err := checkApp(t, strings.Replace(goodApp, tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error with %q", err, tc.want)
			}
		})
	}
}

func TestPinned(t *testing.T) {
	for ref, ok := range map[string]bool{
		"postgres:15.18": true,
		"minio/minio:RELEASE.2025-09-07T16-13-09Z":   true,
		"fpga-faas/faas:0.1.0-dev":                   true,
		"registry.local:5000/team/app:v1.2":          true,
		"busybox@sha256:" + strings.Repeat("ab", 32): true,
		"postgres:15":                  false,
		"postgres:15-alpine":           false,
		"postgres:latest":              false,
		"postgres":                     false,
		"registry.local:5000/team/app": false,
		"minio/minio:RELEASE.latest":   false,
		"busybox@sha256:abc":           false,
		"app:stable":                   false,
	} {
		if err := pinned(ref); (err == nil) != ok {
			t.Errorf("pinned(%q) = %v, want pinned %v", ref, err, ok)
		}
	}
}
