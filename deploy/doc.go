// Package deploy holds deployment descriptions of the platform: the
// Dockerfile of the registry and faasd image, Kubernetes manifests (k8s/: a
// kustomize base, a dev overlay and an example, with the tests that check
// them) and systemd units (systemd/). docker-compose.yml at the repository
// root runs the whole platform on one machine. It contains no Go code
// besides this doc.
package deploy
