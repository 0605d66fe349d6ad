// Package k8se2e is the harness of the device plugin's tests on a real
// Kubernetes cluster: etcd, kube-apiserver (Node and RBAC authorization,
// NodeRestriction and PodSecurity admission), kube-scheduler,
// kube-controller-manager and the kubelet, built from the pinned modules
// of components/go.mod, with faas-cri (components/cmd/faas-cri) as the
// kubelet's container runtime, and faasd serve --device-plugin --sim 2
// with the registry it registers with, on a throwaway PostgreSQL.
//
// Everything runs in a network namespace and a mount namespace the
// harness makes (Main): the network holds loopback and a veth pair (both
// ends inside) with NodeIP (the kubelet refuses a loopback node IP) and no
// route elsewhere, and the fixed directories the kubelet writes
// (/var/lib/kubelet, its pod log directories and libmount's /run/mount)
// are bind mounts of directories of the run, so the run writes nothing
// outside the checkout's build/k8s-e2e (but for the go command's caches).
//
// The tests (e2e_test.go) carry the build tag k8se2e, so `make test` never
// builds them; `make k8s-e2e` builds the components (cached by version
// under build/k8s-e2e), faasd and the registry, and runs them.
package k8se2e
