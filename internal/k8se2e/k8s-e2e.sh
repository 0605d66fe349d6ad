#!/usr/bin/env bash
# make k8s-e2e: builds the pinned etcd and Kubernetes components (once per
# version, into build/k8s-e2e/components-K8S-etcd-ETCD), faas-cri, faasd and
# the registry, then runs the device plugin's tests on a real cluster
# (internal/k8se2e, build tag k8se2e) as root in namespaces of their own.
# The versions are pinned in one place: components/go.mod.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
GO=${GO:-go}
comp=internal/k8se2e/components
out=$root/build/k8s-e2e
k8s=$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' $comp/go.mod)
etcd=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' $comp/go.mod)
bin=$out/components-$k8s-etcd-$etcd
mkdir -p "$out/_gotmp"
# The go command's scratch files stay in the checkout too (its module and
# build caches are the usual ones), in a directory whose leading "_" keeps
# the packages it holds during a build out of ./... patterns.
export GOTMPDIR=$out/_gotmp

# The components live in their own module (GOWORK=off), so that the main
# module's go.mod never names Kubernetes or etcd.
if [ ! -x "$bin/kubelet" ] || [ ! -x "$bin/etcd" ]; then
	echo "k8s-e2e: building etcd $etcd and Kubernetes $k8s (once; about 20 minutes on 2 busy cores)"
	start=$(date +%s)
	rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
	(cd $comp && GOWORK=off GOFLAGS=-mod=readonly nice -n 10 "$GO" build -trimpath -o "$bin.tmp/" \
		go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
	mv "$bin.tmp/server" "$bin.tmp/etcd"
	rm -rf "$bin" && mv "$bin.tmp" "$bin"
	echo "k8s-e2e: components built in $(( $(date +%s) - start )) s"
fi
start=$(date +%s)
(cd $comp && GOWORK=off GOFLAGS=-mod=readonly nice -n 10 "$GO" build -o "$bin/" ./cmd/faas-cri)
mkdir -p "$out/faas-bin"
nice -n 10 "$GO" build -o "$out/faas-bin/" ./services/cmd/faasd ./services/cmd/registry
nice -n 10 "$GO" test -c -tags k8se2e -o "$out/e2e.test" ./internal/k8se2e
echo "k8s-e2e: faas-cri, faasd, registry and the tests built in $(( $(date +%s) - start )) s"

run=$out/run
rm -rf "$run" && mkdir -p "$run/tmp"
start=$(date +%s)
status=0
# TMPDIR keeps the tests' throwaway PostgreSQL inside the run; CI=true
# turns a missing PostgreSQL into a failure, not a skip.
(cd internal/k8se2e && TMPDIR=$run/tmp CI=true FAAS_K8S_E2E_BIN=$bin FAAS_K8S_E2E_FAAS_BIN=$out/faas-bin \
	FAAS_K8S_E2E_DIR=$run "$out/e2e.test" -test.v -test.timeout "${K8S_E2E_TIMEOUT:-30m}" ${K8S_E2E_RUN:+-test.run "$K8S_E2E_RUN"}) || status=$?
echo "k8s-e2e: tests ran in $(( $(date +%s) - start )) s (logs in $run/logs)"
exit $status
