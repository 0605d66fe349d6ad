// Package deploy holds deployment descriptions of the platform: Kubernetes
// manifests and systemd units. It contains no Go code besides this doc.
package deploy
