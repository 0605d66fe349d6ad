package faas

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

func TestAttachRequest(t *testing.T) {
	for _, c := range []struct {
		in      string
		lease   time.Duration
		want    poolapi.AttachRequest
		wantErr string
	}{
		{"acme/mnist", 0, poolapi.AttachRequest{Listing: "acme/mnist"}, ""},
		{"acme/mnist:1.2", 10 * time.Second, poolapi.AttachRequest{Listing: "acme/mnist", Version: "1.2", LeaseSeconds: 10}, ""},
		{"", 0, poolapi.AttachRequest{}, "want LISTING[:VERSION]"},
		{":1", 0, poolapi.AttachRequest{}, "want LISTING[:VERSION]"},
		{"acme/mnist@sha256:00", 0, poolapi.AttachRequest{}, "want LISTING[:VERSION]"},
		{"acme/mnist", 1500 * time.Millisecond, poolapi.AttachRequest{}, "whole seconds"},
		{"acme/mnist", time.Hour, poolapi.AttachRequest{}, "whole seconds"},
	} {
		got, err := attachRequest(c.in, attachOptions{lease: c.lease})
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%q: %v, want an error with %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: %+v, %v; want %+v", c.in, got, err, c.want)
		}
	}
}

// FuzzAttachRequest: any listing argument is a request or a clear error,
// never a panic; a request names a listing.
func FuzzAttachRequest(f *testing.F) {
	for _, s := range []string{"acme/mnist", "acme/mnist:1", ":", "a:b:c", strings.Repeat("x", 300), "\xff"} {
		f.Add(s, int64(0))
		f.Add(s, int64(30*time.Second))
	}
	f.Fuzz(func(t *testing.T, in string, lease int64) {
		r, err := attachRequest(in, attachOptions{lease: time.Duration(lease)})
		if err == nil && (r.Listing == "" || r.LeaseSeconds < 0) {
			t.Fatalf("%q: %+v", in, r)
		}
	})
}

func TestPinnedTLS(t *testing.T) {
	good := poolapi.Attachment{ID: "a", Node: "n", Endpoint: "https://127.0.0.1:1", ServerName: "x.node.faas", TLSCertificate: testCert}
	tc, err := PinnedTLS(good)
	if err != nil || tc.InsecureSkipVerify || tc.ServerName != "x.node.faas" || tc.RootCAs == nil || tc.MinVersion == 0 {
		t.Fatalf("%+v, %v", tc, err)
	}
	for name, a := range map[string]poolapi.Attachment{
		"no certificate": {Endpoint: good.Endpoint, ServerName: good.ServerName},
		"not a PEM":      {Endpoint: good.Endpoint, ServerName: good.ServerName, TLSCertificate: "hello"},
		"plain http":     {Endpoint: "http://127.0.0.1:1", ServerName: good.ServerName, TLSCertificate: testCert},
		"no server name": {Endpoint: good.Endpoint, TLSCertificate: testCert},
	} {
		if _, err := PinnedTLS(a); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// FuzzPinnedTLS: whatever the registry says of a node, the configuration is
// refused or verifies against the pin alone.
func FuzzPinnedTLS(f *testing.F) {
	f.Add(testCert, "https://h:1", "x.node.faas")
	f.Add("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n", "https://h", "")
	f.Fuzz(func(t *testing.T, cert, endpoint, name string) {
		tc, err := PinnedTLS(poolapi.Attachment{TLSCertificate: cert, Endpoint: endpoint, ServerName: name})
		if err == nil && (tc.InsecureSkipVerify || tc.RootCAs == nil || tc.ServerName == "") {
			t.Fatalf("%+v", tc)
		}
	})
}

func TestLeaseLostIs(t *testing.T) {
	err := (&sessionEnded{err: errors.Join(ErrLeaseLost, errors.New("node n lost"))})
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrClosed) {
		t.Fatal("a session ended by a lost lease does not say so")
	}
}

// testCert is a self-signed P-256 certificate, as package nodecert makes.
var testCert = func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "x.node.faas"}, DNSNames: []string{"x.node.faas"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}()

// TestLostAfterDevice: a program woken by Lost meets the lease's error on
// its device, even when the node cut the session first (TestPool saw
// "session ended by faasd" under load: Lost closed before the device
// took the reason).
func TestLostAfterDevice(t *testing.T) {
	c1, c2 := net.Pipe()
	defer c2.Close()
	d := &Device{slot: 3, conn: c1, pending: map[uint64]*call{}, jobs: map[uint64]*Job{}}
	d.shutdown(io.EOF) // the node ended the session
	a := &Attachment{id: "att", lost: make(chan struct{}), dev: d}
	lost := fmt.Errorf("%w: attachment att is detached", ErrLeaseLost)

	d.mu.Lock() // the device takes the reason only once the test lets it
	go a.markLost(lost)
	select {
	case <-a.Lost():
		t.Error("Lost closed before the device took the reason")
	case <-time.After(200 * time.Millisecond):
	}
	d.mu.Unlock()
	<-a.Lost()
	d.mu.Lock()
	err := d.endedErr()
	d.mu.Unlock()
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(a.Err(), ErrLeaseLost) {
		t.Errorf("after Lost: the device's calls fail with %v, Err %v; want ErrLeaseLost", err, a.Err())
	}
}
