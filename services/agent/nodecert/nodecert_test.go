package nodecert

import (
	"bytes"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreate(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Dir: dir, NodeID: "n1", Hostname: "fpga-1", IPs: ListenIPs(":8443")}
	a, err := LoadOrCreate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"n1.node.faas", "fpga-1", "127.0.0.1", "::1"} {
		if err := a.Leaf.VerifyHostname(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if a.Leaf.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key %v", a.Leaf.PublicKeyAlgorithm)
	}
	for _, f := range []string{CertFile, KeyFile} {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v", f, st.Mode(), err)
		}
	}
	b, err := LoadOrCreate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(PEM(a), PEM(b)) {
		t.Error("reload made a new certificate")
	}
	// Near expiry it is renewed.
	cfg.Now = func() time.Time { return time.Now().Add(Validity - RenewBefore + time.Hour) }
	c, err := LoadOrCreate(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(PEM(a), PEM(c)) {
		t.Error("not renewed near expiry")
	}
	if !bytes.Equal(a.Leaf.RawSubjectPublicKeyInfo, c.Leaf.RawSubjectPublicKeyInfo) {
		t.Error("renewal changed the pinned key")
	}
}

func TestNewSANRenews(t *testing.T) {
	dir := t.TempDir()
	a, err := LoadOrCreate(Config{Dir: dir, NodeID: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := LoadOrCreate(Config{Dir: dir, NodeID: "n1", IPs: []net.IP{net.ParseIP("192.0.2.7")}})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(PEM(a), PEM(b)) || b.Leaf.VerifyHostname("192.0.2.7") != nil {
		t.Error("certificate lacking a SAN kept")
	}
}

func TestCorrupt(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreate(Config{Dir: dir, NodeID: "n1"}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, CertFile)
	if err := os.WriteFile(p, []byte("junk"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadOrCreate(Config{Dir: dir, NodeID: "n1"})
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("got %v, want an error naming %s", err, p)
	}
	if b, _ := os.ReadFile(p); string(b) != "junk" {
		t.Error("corrupt file replaced")
	}
}

func TestListenIPs(t *testing.T) {
	for addr, want := range map[string]string{
		":8443": "127.0.0.1,::1", "0.0.0.0:1": "127.0.0.1,::1", "[::]:1": "127.0.0.1,::1",
		"127.0.0.1:1": "127.0.0.1,::1", "192.0.2.1:1": "192.0.2.1", "host:1": "", "bad": "",
	} {
		var got []string
		for _, ip := range ListenIPs(addr) {
			got = append(got, ip.String())
		}
		if g := strings.Join(got, ","); g != want {
			t.Errorf("%s: %s, want %s", addr, g, want)
		}
	}
}
