package api

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// Limits of a heartbeat's remote attach fields.
const (
	maxEndpoint = 256
	maxNodeCert = 8 << 10
)

// parseEndpoint checks a node's advertised remote attach URL.
func parseEndpoint(s string) error {
	if len(s) > maxEndpoint {
		return fieldErr("endpoint", "at most %d bytes", maxEndpoint)
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fieldErr("endpoint", "want an https URL with a host")
	}
	return nil
}

// parseNodeCert checks a node's serving certificate: one PEM X.509
// certificate naming poolapi.ServerName(nodeID), not expired at now. It
// returns the canonical PEM, so the pin compares certificates, not
// formatting.
func parseNodeCert(text, nodeID string, now time.Time) (string, error) {
	if len(text) > maxNodeCert {
		return "", fieldErr("tls_certificate", "at most %d bytes", maxNodeCert)
	}
	block, rest := pem.Decode([]byte(text))
	if block == nil || block.Type != "CERTIFICATE" || strings.TrimSpace(string(rest)) != "" {
		return "", fieldErr("tls_certificate", "want one PEM CERTIFICATE block")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "", fieldErr("tls_certificate", "not an X.509 certificate: %v", err)
	}
	want := poolapi.ServerName(nodeID)
	found := false
	for _, d := range c.DNSNames {
		found = found || strings.EqualFold(d, want)
	}
	if !found {
		return "", fieldErr("tls_certificate", "DNS names %q lack %s", c.DNSNames, want)
	}
	if now.After(c.NotAfter) {
		return "", fieldErr("tls_certificate", "expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})), nil
}

// keyFingerprint is what the registry pins of a node's PEM certificate:
// the SHA-256 of its public key (SubjectPublicKeyInfo), so a renewal that
// keeps the key needs no repin. "" when text is no certificate.
func keyFingerprint(text string) string {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return ""
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(c.RawSubjectPublicKeyInfo)
	return hex.EncodeToString(sum[:])
}
