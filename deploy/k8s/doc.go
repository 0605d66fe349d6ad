// Package k8s holds the platform's Kubernetes manifests, as kustomizations:
// base (the registry, its PodDisruptionBudget and Service, and the faasd
// DaemonSet), overlays/dev (a whole development cluster: PostgreSQL, MinIO,
// dev-only Secrets, faasd on simulated boards), examples/inference (a
// tenant's Deployment on a faas.dev/alidnn-share) and examples/modelserver
// (the model server on a faas.dev/chip; examples/modelserver-pool on pool
// attachments). README.md says how to use them.
//
// Its tests render every kustomization with kustomize's Go API, decode each
// object strictly into the k8s.io/api types and check what the cluster
// would otherwise find out late: probes, resource requests and limits,
// pinned images, security contexts, the registry's replicas and disruption
// budget, Services that select a workload, and references to Secrets and
// ConfigMaps that exist. There is no other Go code here.
package k8s
