package main

import (
	"strings"
	"testing"
)

func TestAdvertiseURL(t *testing.T) {
	got, err := advertiseURL("", "fpga-1", ":8443")
	if err != nil || got != "https://fpga-1:8443" {
		t.Errorf("default: %q %v", got, err)
	}
	if got, err := advertiseURL("https://n.example:443", "h", ":1"); err != nil || got != "https://n.example:443" {
		t.Errorf("given: %q %v", got, err)
	}
	for _, bad := range []string{"http://h:1", "https://h", "https://:1", "h:1", "https://u@h:1", "https://h:1/x"} {
		if _, err := advertiseURL(bad, "h", ":1"); err == nil || !strings.Contains(err.Error(), "--advertise") {
			t.Errorf("%s: %v", bad, err)
		}
	}
}

func TestListenTLS(t *testing.T) {
	dir := t.TempDir()
	cfg, err := listenTLS(serveFlags{stateDir: dir, hostname: "fpga-1", listen: ":8443"}, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Certificates[0].Leaf.VerifyHostname("n1.node.faas"); err != nil {
		t.Error(err)
	}
	if _, err := listenTLS(serveFlags{stateDir: dir, listen: ":1", tlsCert: "x"}, "n1"); err == nil {
		t.Error("--tls-cert without --tls-key accepted")
	}
}
