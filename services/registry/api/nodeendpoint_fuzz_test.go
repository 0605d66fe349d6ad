package api

import (
	"errors"
	"testing"
	"time"
)

// FuzzNodeEndpoint: a heartbeat's endpoint and certificate never panic the
// parsers, and every refusal is a field error naming its field.
func FuzzNodeEndpoint(f *testing.F) {
	f.Add("https://h:1", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n")
	f.Add("http://h", "")
	f.Add("https://[::1]:8443/", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n-----BEGIN CERTIFICATE-----\n")
	f.Fuzz(func(t *testing.T, endpoint, cert string) {
		var fe *FieldError
		if err := parseEndpoint(endpoint); err != nil && (!errors.As(err, &fe) || fe.Field != "endpoint") {
			t.Fatalf("endpoint %q: %v", endpoint, err)
		}
		pem, err := parseNodeCert(cert, "00000000-0000-0000-0000-000000000000", time.Now())
		if err != nil && (!errors.As(err, &fe) || fe.Field != "tls_certificate") {
			t.Fatalf("certificate: %v", err)
		}
		if err == nil && keyFingerprint(pem) == "" {
			t.Fatal("accepted certificate has no key fingerprint")
		}
	})
}
