package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"

	"github.com/fpga-faas/faas/services/agent/nodecert"
	"github.com/fpga-faas/faas/services/agent/server"
)

// listenTLS gives --listen's TLS config: --tls-cert/--tls-key when given,
// else the node's own certificate in the state dir, which the registry pins.
func listenTLS(f serveFlags, nodeID string) (*tls.Config, error) {
	if f.tlsCert != "" || f.tlsKey != "" {
		if f.tlsCert == "" || f.tlsKey == "" {
			return nil, errors.New("--tls-cert and --tls-key go together")
		}
		return server.LoadTLS(f.tlsCert, f.tlsKey)
	}
	cert, err := nodecert.LoadOrCreate(nodecert.Config{Dir: f.stateDir, NodeID: nodeID, Hostname: f.hostname,
		IPs: nodecert.ListenIPs(f.listen)})
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}, nil
}

// advertiseURL checks --advertise, defaulting to https://HOSTNAME:PORT of
// --listen.
func advertiseURL(advertise, hostname, listen string) (string, error) {
	if advertise == "" {
		_, port, err := net.SplitHostPort(listen)
		if err != nil {
			return "", fmt.Errorf("--listen %q: %w", listen, err)
		}
		return "https://" + net.JoinHostPort(hostname, port), nil
	}
	u, err := url.Parse(advertise)
	if err != nil {
		return "", fmt.Errorf("--advertise: %w", err)
	}
	if u.Scheme != "https" || u.Hostname() == "" || u.Port() == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--advertise %q: want https://HOST:PORT", advertise)
	}
	return advertise, nil
}
