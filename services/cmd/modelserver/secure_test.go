package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/services/modelserver/inferencepb"
)

// runMainEnv makes the test binary run the command's main instead of the
// tests, so that a test runs the command as its users do: flags, exit
// codes, listeners.
const runMainEnv = "MODELSERVER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// command is the command run from the test binary with args.
func command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// selfSigned writes a certificate for 127.0.0.1 and its key, and returns
// their paths and a pool that trusts it.
func selfSigned(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "modelserver"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(k)
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return cert, key, pool
}

// TestCommandTLSAndTokens runs the command with -tokens, -tls-cert and
// -tls-key: both APIs answer over TLS, the health checks anonymously, the
// rest with a token only; the tokens never reach the log.
func TestCommandTLSAndTokens(t *testing.T) {
	repo := t.TempDir()
	model, err := os.ReadFile(filepath.Join(testenv.TestData(t, "onnx", "models", "mnist"), "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(repo, "mnist", "1"), 0o755)
	os.WriteFile(filepath.Join(repo, "mnist", "config.json"), []byte(`{"name": "mnist"}`), 0o644)
	os.WriteFile(filepath.Join(repo, "mnist", "1", "model.onnx"), model, 0o644)
	const token = "infer-0123456789abcdef"
	tokens := filepath.Join(t.TempDir(), "tokens")
	os.WriteFile(tokens, []byte("infer "+token+"\n"), 0o600)
	cert, key, pool := selfSigned(t)

	cmd := command("-repo", repo, "-sim", "1", "-listen", "127.0.0.1:0", "-grpc-listen", "127.0.0.1:0",
		"-tokens", tokens, "-tls-cert", cert, "-tls-key", key)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	var logs strings.Builder
	addrs := map[string]string{}
	sc := bufio.NewScanner(stderr)
	for len(addrs) < 2 && sc.Scan() {
		logs.WriteString(sc.Text() + "\n")
		var l struct{ Msg, Addr string }
		if json.Unmarshal(sc.Bytes(), &l) == nil && l.Addr != "" {
			addrs[l.Msg] = l.Addr
		}
	}
	rest, grpcAddr := addrs["serving the Open Inference Protocol"], addrs["serving the Open Inference Protocol over gRPC"]
	if rest == "" || grpcAddr == "" {
		t.Fatalf("no listener addresses in the log:\n%s", logs.String())
	}
	done := make(chan struct{})
	go func() { io.Copy(&logs, stderr); close(done) }()

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(path, tok string) int {
		req, _ := http.NewRequest(http.MethodGet, "https://"+rest+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(30 * time.Second); get("/v2/health/ready", "") != 200; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not ready in 30s")
		}
	}
	if code := get("/v2/models/mnist", ""); code != 401 {
		t.Errorf("metadata without a token: %d", code)
	}
	if code := get("/v2/models/mnist", token); code != 200 {
		t.Errorf("metadata with the token: %d", code)
	}
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := inferencepb.NewGRPCInferenceServiceClient(conn)
	ctx := context.Background()
	if _, err := client.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "mnist"}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("gRPC metadata without a token: %v", err)
	}
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	if _, err := client.ModelMetadata(ctx, &inferencepb.ModelMetadataRequest{Name: "mnist"}); err != nil {
		t.Errorf("gRPC metadata with the token: %v", err)
	}
	cmd.Process.Signal(os.Interrupt)
	<-done
	if err := cmd.Wait(); err != nil {
		t.Errorf("the command after SIGINT: %v", err)
	}
	if strings.Contains(logs.String(), token) {
		t.Errorf("the log names the token:\n%s", logs.String())
	}
}

// TestCommandRefusesExposure: the command exits 2 on a non-loopback
// address without authentication, saying what to give.
func TestCommandRefusesExposure(t *testing.T) {
	out, err := command("-repo", t.TempDir(), "-sim", "1", "-listen", "0.0.0.0:0", "-grpc-listen", "").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "-insecure-no-auth") {
		t.Errorf("exit %v: %s", err, out)
	}
}
