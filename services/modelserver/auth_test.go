package modelserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The tokens of the tests, one of each role.
const (
	metadataToken = "metadata-token-0123456789"
	inferToken    = "infer-token-0123456789abc"
	adminToken    = "admin-token-0123456789abc"
)

func testAuth(t *testing.T, mtls bool) *Auth {
	t.Helper()
	toks, err := ParseTokens("tokens", []byte("# roles\nmetadata "+metadataToken+"\ninfer "+inferToken+"\n\nadmin "+adminToken+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuth(toks, mtls)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestParseTokens(t *testing.T) {
	secret := "s3cret-s3cret-s3cret"
	for _, c := range []struct{ file, want string }{
		{"admin " + secret + "\nadmin " + secret, "tokens:2: the token of an earlier line again"},
		{"root " + secret, `tokens:1: role "root"`},
		{"infer short", "tokens:1: a token of 5 bytes"},
		{"infer " + secret + " extra", "tokens:1: want ROLE TOKEN"},
		{"# nothing\n", "holds no token"},
	} {
		_, err := ParseTokens("tokens", []byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), secret) {
			t.Errorf("%q: %v, want an error saying %q and not the token", c.file, err, c.want)
		}
	}
	if _, err := NewAuth(nil, false); err == nil {
		t.Error("NewAuth with neither tokens nor mTLS")
	}
}

// TestAuthCurl: with tokens, health stays anonymous; everything else is
// 401 without a valid token and 403 beyond the token's role, in the
// protocol's error form.
func TestAuthCurl(t *testing.T) {
	bin := curlPath(t)
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Auth: testAuth(t, false)})
	req := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(req, jsonInfer(t, "x", mnistCases(t)[0].Input, nil), 0o644); err != nil {
		t.Fatal(err)
	}
	bearer := func(tok string) []string { return []string{"-H", "Authorization: Bearer " + tok} }
	infer := []string{"--data-binary", "@" + req, s.URL + "/v2/models/mnist/infer"}
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"live", []string{s.URL + "/v2/health/live"}, 200, `"live":true`},
		{"ready", []string{s.URL + "/v2/health/ready"}, 200, `"ready":true`},
		{"server metadata, no token", []string{s.URL + "/v2"}, 401, "a bearer token is required"},
		{"a wrong token", append(bearer("wrong-token-0123456789"), s.URL+"/v2/models/mnist"), 401, "not valid"},
		{"basic, not bearer", []string{"-u", "a:" + adminToken, s.URL + "/v2"}, 401, "a bearer token is required"},
		{"unknown path, no token", []string{s.URL + "/v3"}, 401, "unauthenticated"},
		{"metadata", append(bearer(metadataToken), s.URL+"/v2/models/mnist"), 200, `"platform":"alidnn"`},
		{"metadata infers", append(bearer(metadataToken), infer...), 403, "role metadata"},
		{"infer", append(bearer(inferToken), infer...), 200, `"model_name":"mnist"`},
		{"infer unloads", append(bearer(inferToken), "-X", "POST", s.URL+"/v2/repository/models/mnist/unload"), 403, "needs role admin"},
		{"infer lists", append(bearer(inferToken), "-X", "POST", s.URL+"/v2/repository/index"), 403, "permission denied"},
		{"admin lists", append(bearer(adminToken), "-X", "POST", s.URL+"/v2/repository/index"), 200, `"state":"READY"`},
		{"admin infers", append(bearer(adminToken), infer...), 200, `"model_name":"mnist"`},
	} {
		code, b := curl(t, bin, c.args...)
		if code != c.code || !strings.Contains(string(b), c.says) {
			t.Errorf("%s: %d %s, want %d saying %s", c.name, code, b, c.code, c.says)
		}
		if code >= 400 {
			var e struct{ Error string }
			if json.Unmarshal(b, &e) != nil || e.Error == "" {
				t.Errorf("%s: %s is not the protocol's error object", c.name, b)
			}
		}
	}
	code, b := curl(t, bin, "-o", "/dev/null", "-D", "-", s.URL+"/v2")
	if code != 401 || !strings.Contains(strings.ToLower(string(b)), "www-authenticate: bearer") {
		t.Errorf("401 without a Bearer challenge: %s", b)
	}
}

// TestAuthGrpcurl: ServerLive and ServerReady stay anonymous; other RPCs
// are Unauthenticated without a valid token in the authorization metadata
// and PermissionDenied beyond its role.
func TestAuthGrpcurl(t *testing.T) {
	bin := grpcurlPath(t)
	s := serveGRPC(t, writeRepo(t, mnistConfig, "onnx"), Config{Auth: testAuth(t, false)})
	infer := `{"model_name": "mnist", "inputs": [{"name": "Input3", "datatype": "FP32", "shape": [1, 1, 28, 28], "contents": {"fp32_contents": [` +
		strings.Repeat("0,", 783) + `0]}}]}`
	flags := func(tok string) []string {
		if tok == "" {
			return []string{"-plaintext"}
		}
		return []string{"-plaintext", "-H", "authorization: Bearer " + tok}
	}
	for _, c := range []struct{ name, token, method, body, code, says string }{
		{"live", "", "ServerLive", "{}", "OK", ""},
		{"ready", "", "ServerReady", "{}", "OK", ""},
		{"metadata, no token", "", "ServerMetadata", "{}", "Unauthenticated", "a bearer token is required"},
		{"a wrong token", "wrong-token-0123456789", "ModelMetadata", `{"name": "mnist"}`, "Unauthenticated", "not valid"},
		{"metadata", metadataToken, "ModelMetadata", `{"name": "mnist"}`, "OK", ""},
		{"metadata infers", metadataToken, "ModelInfer", infer, "PermissionDenied", "role metadata"},
		{"infer", inferToken, "ModelInfer", infer, "OK", ""},
		{"admin", adminToken, "ModelInfer", infer, "OK", ""},
	} {
		if _, code, msg := grpcurlWith(t, bin, flags(c.token), s.Addr, c.method, c.body); code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("%s: %s %q, want %s saying %q", c.name, code, msg, c.code, c.says)
		}
	}
}

// pki is a CA and the certificates of the mTLS test, as PEM files.
type pki struct {
	ca, serverCert, serverKey, clientCert, clientKey, otherCert, otherKey string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	serial := int64(0)
	issue := func(tmpl *x509.Certificate, parent *x509.Certificate, parentKey, key *ecdsa.PrivateKey) (*x509.Certificate, []byte) {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := x509.ParseCertificate(der)
		return c, der
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		b, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	caTmpl := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	}
	var p pki
	caKey, otherCAKey := newKey(), newKey()
	ca, caDER := issue(caTmpl("test CA"), nil, nil, caKey)
	otherCA, _ := issue(caTmpl("other CA"), nil, nil, otherCAKey)
	p.ca = write("ca.pem", "CERTIFICATE", caDER)
	sk, ck, ok := newKey(), newKey(), newKey()
	_, sDER := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "modelserver"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, caKey, sk)
	_, cDER := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "client"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, ca, caKey, ck)
	_, oDER := issue(&x509.Certificate{Subject: pkix.Name{CommonName: "intruder"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}, otherCA, otherCAKey, ok)
	p.serverCert, p.serverKey = write("server.pem", "CERTIFICATE", sDER), write("server-key.pem", "PRIVATE KEY", keyDER(sk))
	p.clientCert, p.clientKey = write("client.pem", "CERTIFICATE", cDER), write("client-key.pem", "PRIVATE KEY", keyDER(ck))
	p.otherCert, p.otherKey = write("other.pem", "CERTIFICATE", oDER), write("other-key.pem", "PRIVATE KEY", keyDER(ok))
	return p
}

// TestMTLS: with a client CA and no tokens, REST (curl) and gRPC
// (grpcurl) refuse a client without a certificate (401, Unauthenticated)
// but for the health checks, fail the handshake of a certificate of
// another CA, and serve a certificate of the CA.
func TestMTLS(t *testing.T) {
	curlBin, grpcurlBin := curlPath(t), grpcurlPath(t)
	p := newPKI(t)
	tcfg, err := ServerTLS(p.serverCert, p.serverKey, p.ca)
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuth(nil, true)
	if err != nil {
		t.Fatal(err)
	}
	s := serve(t, writeRepo(t, mnistConfig, "onnx"), Config{Auth: a})
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.TLS = tcfg
	hs.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes are the test's
	hs.StartTLS()
	t.Cleanup(hs.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := s.GRPCServer(grpc.Creds(credentials.NewTLS(tcfg)))
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	gaddr := ln.Addr().String()

	tlsArgs := []string{"--cacert", p.ca}
	mine := append(tlsArgs, "--cert", p.clientCert, "--key", p.clientKey)
	if code, b := curl(t, curlBin, append(tlsArgs, hs.URL+"/v2/health/ready")...); code != 200 {
		t.Errorf("ready without a certificate: %d %s", code, b)
	}
	if code, b := curl(t, curlBin, append(tlsArgs, hs.URL+"/v2")...); code != 401 || !strings.Contains(string(b), "client certificate is required") {
		t.Errorf("metadata without a certificate: %d %s", code, b)
	}
	if code, b := curl(t, curlBin, append(mine, hs.URL+"/v2/models/mnist")...); code != 200 {
		t.Errorf("metadata with a certificate: %d %s", code, b)
	}
	other := exec.Command(curlBin, "-sS", "--cacert", p.ca, "--cert", p.otherCert, "--key", p.otherKey, hs.URL+"/v2")
	if out, err := other.CombinedOutput(); err == nil {
		t.Errorf("curl with a certificate of another CA was answered: %s", out)
	}

	gflags := []string{"-cacert", p.ca}
	gmine := append(gflags, "-cert", p.clientCert, "-key", p.clientKey)
	if _, code, msg := grpcurlWith(t, grpcurlBin, gflags, gaddr, "ServerLive", "{}"); code != "OK" {
		t.Errorf("ServerLive without a certificate: %s %s", code, msg)
	}
	if _, code, msg := grpcurlWith(t, grpcurlBin, gflags, gaddr, "ServerMetadata", "{}"); code != "Unauthenticated" || !strings.Contains(msg, "client certificate") {
		t.Errorf("ServerMetadata without a certificate: %s %s", code, msg)
	}
	if _, code, msg := grpcurlWith(t, grpcurlBin, gmine, gaddr, "ModelMetadata", `{"name": "mnist"}`); code != "OK" {
		t.Errorf("ModelMetadata with a certificate: %s %s", code, msg)
	}
	cmd := exec.Command(grpcurlBin, "-cacert", p.ca, "-cert", p.otherCert, "-key", p.otherKey, "-import-path", "inferencepb", "-proto", "grpc_predict_v2.proto",
		gaddr, "inference.GRPCInferenceService/ServerMetadata")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Errorf("grpcurl with a certificate of another CA was answered: %s", out)
	}
	// Plain HTTP to the TLS port gets no answer of the API.
	if resp, err := http.Get(strings.Replace(hs.URL, "https", "http", 1) + "/v2"); err == nil {
		if resp.StatusCode == 200 {
			t.Error("plain HTTP answered 200")
		}
		resp.Body.Close()
	}
}
