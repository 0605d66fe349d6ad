// Package agent is the node agent faasd: it owns the boards of one host
// (device), discovers them (pcie), and exposes slots, the image cache and the
// tenants' instruction queues through its local API.
package agent
