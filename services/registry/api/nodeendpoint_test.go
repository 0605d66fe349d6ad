package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/agent/nodecert"
)

// nodeCertPEM makes a real node certificate for id as faasd does, made at now.
func nodeCertPEM(t *testing.T, id string, now time.Time) string {
	t.Helper()
	c, err := nodecert.LoadOrCreate(nodecert.Config{Dir: t.TempDir(), NodeID: id, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	return string(nodecert.PEM(c))
}

func TestHeartbeatCertificatePin(t *testing.T) {
	e := newEnv(t)
	var n registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "fpga-pin", "public_key": x25519B64(t)}).decode(t, &n)
	hb := func(status int, endpoint, cert string) resp {
		t.Helper()
		return e.must(status, "node1", "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{}, "endpoint": endpoint, "tls_certificate": cert})
	}
	dir := t.TempDir()
	made := func(at time.Time) string {
		c, err := nodecert.LoadOrCreate(nodecert.Config{Dir: dir, NodeID: n.ID, Now: func() time.Time { return at }})
		if err != nil {
			t.Fatal(err)
		}
		return string(nodecert.PEM(c))
	}
	first, second := made(time.Now()), nodeCertPEM(t, n.ID, time.Now())
	renewed := made(time.Now().Add(nodecert.Validity - nodecert.RenewBefore + time.Hour))
	if renewed == first {
		t.Fatal("no renewal")
	}

	hb(200, "https://fpga-pin:8443", first).decode(t, &n)
	if n.TLSCertificate != first || n.Endpoint != "https://fpga-pin:8443" || n.ServerName != n.ID+".node.faas" {
		t.Fatalf("not pinned: %+v", n)
	}
	// A renewal keeps the key: accepted, and the renewed certificate is kept.
	hb(200, "https://fpga-pin:9443", renewed).decode(t, &n)
	if n.TLSCertificate != renewed {
		t.Fatalf("renewal not recorded: %+v", n)
	}
	hb(200, "https://fpga-pin:9443", first)
	// A heartbeat without the fields (an older faasd) keeps the pin.
	e.must(200, "node1", "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{}}).decode(t, &n)
	if n.TLSCertificate != first || n.Endpoint != "https://fpga-pin:9443" {
		t.Fatalf("lost pin: %+v", n)
	}
	r := hb(422, "https://fpga-pin:8443", second)
	if !strings.Contains(string(r.body), "tls_certificate") || !strings.Contains(string(r.body), "repin") {
		t.Fatalf("refusal %s", r.body)
	}
	var audit struct{ Items []registryapi.AuditEntry }
	e.must(200, "admin", "GET", "/audit?limit=200", nil).decode(t, &audit)
	found := false
	for _, a := range audit.Items {
		found = found || (a.Action == "node.certificate_refused" && a.TargetID == n.ID && strings.HasPrefix(a.Outcome, "denied"))
	}
	if !found {
		t.Error("no node.certificate_refused audit entry")
	}

	e.must(403, "node1", "POST", "/nodes/"+n.ID+"/repin", nil)
	e.must(200, "admin", "POST", "/nodes/"+n.ID+"/repin", nil).decode(t, &n)
	if n.TLSCertificate != "" {
		t.Fatalf("repin kept %q", n.TLSCertificate)
	}
	hb(200, "https://fpga-pin:8443", second).decode(t, &n)
	if n.TLSCertificate != second {
		t.Fatal("new certificate not pinned after repin")
	}
	var nodes struct{ Items []registryapi.Node }
	e.must(200, "admin", "GET", "/nodes", nil).decode(t, &nodes)
	if len(nodes.Items) != 1 || nodes.Items[0].TLSCertificate != second || nodes.Items[0].ServerName != n.ServerName {
		t.Fatalf("listing %+v", nodes.Items)
	}
}

func TestHeartbeatCertificateRefused(t *testing.T) {
	e := newEnv(t)
	var n registryapi.Node
	e.must(201, "node1", "POST", "/nodes", item{"hostname": "fpga-bad", "public_key": x25519B64(t)}).decode(t, &n)
	good := nodeCertPEM(t, n.ID, time.Now())
	for name, c := range map[string]struct{ endpoint, cert, field string }{
		"bad PEM":     {"https://h:1", "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n", "tls_certificate"},
		"two certs":   {"https://h:1", good + good, "tls_certificate"},
		"wrong SAN":   {"https://h:1", nodeCertPEM(t, "00000000-0000-0000-0000-000000000000", time.Now()), "tls_certificate"},
		"expired":     {"https://h:1", nodeCertPEM(t, n.ID, time.Now().Add(-2*nodecert.Validity)), "tls_certificate"},
		"too large":   {"https://h:1", strings.Repeat("x", 9000), "tls_certificate"},
		"no cert":     {"https://h:1", "", "tls_certificate"},
		"not https":   {"http://h:1", good, "endpoint"},
		"no host":     {"https:///x", good, "endpoint"},
		"no endpoint": {"", good, "endpoint"},
		"long":        {"https://" + strings.Repeat("h", 300), good, "endpoint"},
	} {
		r := e.must(422, "node1", "POST", "/nodes/"+n.ID+"/heartbeat", item{"boards": []item{}, "endpoint": c.endpoint, "tls_certificate": c.cert})
		if !strings.Contains(string(r.body), `"`+c.field+`"`) {
			t.Errorf("%s: %s does not name %s", name, r.body, c.field)
		}
	}
	e.must(200, "admin", "GET", "/nodes", nil)
}
