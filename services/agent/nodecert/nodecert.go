// Package nodecert makes and keeps faasd's self-signed serving certificate
// for remote attach. The registry pins the certificate a node first reports,
// so tenants can verify the node over TLS 1.3 without a shared CA: the key
// must therefore survive restarts, and is only replaced near expiry.
package nodecert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/poolapi"
)

// File names inside the state directory.
const (
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

// Validity is how long a new certificate lasts; RenewBefore is how close to
// expiry a loaded certificate is replaced.
const (
	Validity    = 365 * 24 * time.Hour
	RenewBefore = 30 * 24 * time.Hour
)

// ServerName is the TLS server name clients use for a node: a name only
// the registry's pin vouches for, never resolved in DNS.
func ServerName(nodeID string) string { return poolapi.ServerName(nodeID) }

// Config says what the certificate must name.
type Config struct {
	Dir      string           // state directory holding tls.crt and tls.key
	NodeID   string           // required; gives the DNS SAN ServerName(NodeID)
	Hostname string           // optional extra DNS SAN
	IPs      []net.IP         // optional IP SANs
	Now      func() time.Time // zero means time.Now
}

// LoadOrCreate returns the certificate in cfg.Dir, creating it when absent
// and replacing it when fewer than RenewBefore remain or it no longer names
// cfg's SANs. A replacement keeps the key, since the registry pins the
// node's public key: a renewal needs no repin. A file that exists but does
// not parse is an error naming it: replacing it silently would change the
// pinned key.
func LoadOrCreate(cfg Config) (tls.Certificate, error) {
	if cfg.NodeID == "" {
		return tls.Certificate{}, errors.New("nodecert: no node id")
	}
	now := time.Now
	if cfg.Now != nil {
		now = cfg.Now
	}
	certPath, keyPath := filepath.Join(cfg.Dir, CertFile), filepath.Join(cfg.Dir, KeyFile)
	cert, err := load(certPath, keyPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return tls.Certificate{}, err
	case now().Add(RenewBefore).Before(cert.Leaf.NotAfter) && names(cert.Leaf, cfg):
		return cert, nil
	}
	key, _ := cert.PrivateKey.(*ecdsa.PrivateKey)
	return create(cfg, now(), certPath, keyPath, key)
}

func load(certPath, keyPath string) (tls.Certificate, error) {
	c, errC := os.ReadFile(certPath)
	k, errK := os.ReadFile(keyPath)
	if errors.Is(errC, fs.ErrNotExist) && errors.Is(errK, fs.ErrNotExist) {
		return tls.Certificate{}, fs.ErrNotExist
	}
	if errC != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %w", errC)
	}
	if errK != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %w", errK)
	}
	cert, err := tls.X509KeyPair(c, k)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %s and %s: %w (remove both to make a new certificate, then repin the node in the registry)", certPath, keyPath, err)
	}
	return cert, nil
}

func names(leaf *x509.Certificate, cfg Config) bool {
	if leaf.VerifyHostname(ServerName(cfg.NodeID)) != nil {
		return false
	}
	if cfg.Hostname != "" && leaf.VerifyHostname(cfg.Hostname) != nil {
		return false
	}
	for _, ip := range cfg.IPs {
		if leaf.VerifyHostname(ip.String()) != nil {
			return false
		}
	}
	return true
}

// create writes a new certificate for key, or for a new P-256 key when key
// is nil.
func create(cfg Config, now time.Time, certPath, keyPath string, key *ecdsa.PrivateKey) (tls.Certificate, error) {
	if key == nil {
		var err error
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return tls.Certificate{}, fmt.Errorf("nodecert: %w", err)
		}
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %w", err)
	}
	dns := []string{ServerName(cfg.NodeID)}
	if cfg.Hostname != "" && net.ParseIP(cfg.Hostname) == nil {
		dns = append(dns, cfg.Hostname)
	}
	ips := append([]net.IP(nil), cfg.IPs...)
	if ip := net.ParseIP(cfg.Hostname); ip != nil {
		ips = append(ips, ip)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: ServerName(cfg.NodeID)},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dns, IPAddresses: ips, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %w", err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("nodecert: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	// The key goes first so a crash between the renames leaves a pair that
	// fails to load loudly rather than a stale certificate with a new key.
	if err := writeAtomic(keyPath, keyPEM); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeAtomic(certPath, certPEM); err != nil {
		return tls.Certificate{}, err
	}
	return tls.X509KeyPair(certPEM, keyPEM)
}

func writeAtomic(path string, b []byte) error {
	if err := atomicfile.Write(path, b, 0o600); err != nil {
		return fmt.Errorf("nodecert: %s: %w", path, err)
	}
	return nil
}

// PEM returns the PEM encoding of cert's leaf, as reported to the registry.
func PEM(cert tls.Certificate) []byte {
	if len(cert.Certificate) == 0 {
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]})
}

// ListenIPs gives the IP SANs for a listen address: its IP when it names
// one, plus the loopback addresses when it listens on all or on loopback.
func ListenIPs(addr string) []net.IP {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil
	}
	ip := net.ParseIP(host)
	loop := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	switch {
	case host == "" || (ip != nil && ip.IsUnspecified()):
		return loop
	case ip == nil:
		return nil
	case ip.IsLoopback():
		if ip.Equal(loop[0]) || ip.Equal(loop[1]) {
			return loop
		}
		return append([]net.IP{ip}, loop...)
	default:
		return []net.IP{ip}
	}
}
