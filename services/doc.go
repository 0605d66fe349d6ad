// Package services holds the platform's long-running programs: the registry
// (marketplace control plane with an OCI registry at its core) and the node
// agent faasd that owns the FPGA boards of one host. Their mains live in
// services/cmd; nothing outside services/cmd imports a service package.
package services
