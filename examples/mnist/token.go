package main

import "github.com/fpga-faas/faas/sdk/faas"

// token is the registry API token faasd knows the tenant by: $FAAS_TOKEN,
// or the one `faas login` stored. A program may run without one on the
// unix socket, where faasd knows the caller by its uid.
func token() (string, error) {
	l, err := faas.StoredLogin()
	return l.Token, err
}
