package main

import "github.com/fpga-faas/faas/sdk/faas"

// token is the credential faasd knows the caller by: $FAAS_TOKEN, or the
// registry API token `faas login` stored, or in a Kubernetes pod the
// allocation credential of its devices ($FAAS_ALLOCATION_TOKEN). A program
// may run without one on faasd's own unix socket, where faasd knows the
// caller by its uid.
func token() (string, error) { return faas.AgentToken() }
