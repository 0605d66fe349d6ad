package server_test

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// Install commands printed when a client binary is missing. crane's version
// is the go-containerregistry of go.mod. oras's @latest is refused by the
// module proxy and `go install oras.land/oras/cmd/oras@v1.3.3` fails on its
// deprecation lookup, so it is installed from a scratch module.
const (
	installCrane  = "go install github.com/google/go-containerregistry/cmd/crane@v0.22.1"
	installOras   = "d=$(mktemp -d) && cd $d && go mod init orasbuild && go get oras.land/oras/cmd/oras@v1.3.3 && GOBIN=$(go env GOPATH)/bin go install oras.land/oras/cmd/oras"
	installCosign = "go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5"
)

// tool finds a client binary on PATH or in $(go env GOPATH)/bin; a missing
// one skips the test, or fails it when CI is true.
func tool(t *testing.T, name, install string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	gopath := os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopath = strings.TrimSpace(string(out))
	}
	for _, dir := range filepath.SplitList(gopath) {
		p := filepath.Join(dir, "bin", name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("%s not found; install it with: %s", name, install)
	}
	t.Skipf("%s not found; install it with: %s", name, install)
	return ""
}

// clientEnv isolates the clients' configuration (docker config, home) in a
// temporary directory.
type clientEnv struct {
	t   *testing.T
	dir string
	env []string
}

func newClientEnv(t *testing.T) *clientEnv {
	dir := t.TempDir()
	env := []string{
		"HOME=" + dir,
		"DOCKER_CONFIG=" + filepath.Join(dir, "docker"),
		"PATH=" + os.Getenv("PATH"),
		"TUF_ROOT=" + filepath.Join(dir, "tuf"),
		"SIGSTORE_NO_CACHE=true",
		"COSIGN_PASSWORD=test-key-password",
	}
	return &clientEnv{t: t, dir: dir, env: env}
}

// run runs bin with args (stdin optional) and returns stdout; failure fails
// the test unless wantErr.
func (c *clientEnv) run(wantErr bool, stdin string, bin string, args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if (err != nil) != wantErr {
		c.t.Fatalf("%s %s: err %v (want error: %v)\nstdout: %s\nstderr: %s",
			filepath.Base(bin), strings.Join(args, " "), err, wantErr, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func layerTar(t *testing.T, path string, files map[string]string) {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for n, content := range files {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write([]byte(content))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestClientsCraneCosign(t *testing.T) {
	crane := tool(t, "crane", installCrane)
	cosign := tool(t, "cosign", installCosign)
	r := start(t, server.Config{})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	r.user(t, "tenant1", auth.RoleTenant, tenantPW)
	c := newClientEnv(t)
	ref := r.host + "/isv1/app:1"

	c.run(false, isvPW, crane, "auth", "login", r.host, "-u", "isv1", "--password-stdin")
	layer := filepath.Join(c.dir, "layer.tar")
	layerTar(t, layer, map[string]string{"hello.txt": "hello from crane\n"})
	c.run(false, "", crane, "append", "--insecure", "-f", layer, "-t", ref)
	digest := strings.TrimSpace(c.run(false, "", crane, "digest", "--insecure", ref))
	if !strings.HasPrefix(digest, "sha256:") {
		t.Fatalf("crane digest: %q", digest)
	}
	out := filepath.Join(c.dir, "pulled.tar")
	c.run(false, "", crane, "pull", "--insecure", ref, out)
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Fatalf("crane pull wrote nothing: %v", err)
	}
	c.run(false, "", crane, "copy", "--insecure", ref, r.host+"/isv1/app:copy")
	if tags := c.run(false, "", crane, "ls", "--insecure", r.host+"/isv1/app"); !strings.Contains(tags, "copy") {
		t.Errorf("crane ls: %q", tags)
	}

	// cosign signs with a key, storing the signature in the registry
	// through the same docker config, and verifies it offline.
	c.run(false, "", cosign, "generate-key-pair")
	byDigest := r.host + "/isv1/app@" + digest
	c.run(false, "", cosign, "sign", "--key", "cosign.key", "--tlog-upload=false", "--allow-http-registry", "--yes", byDigest)
	c.run(false, "", cosign, "verify", "--key", "cosign.pub", "--insecure-ignore-tlog", "--allow-http-registry", byDigest)
	sigTag := strings.Replace(digest, ":", "-", 1) + ".sig"
	if tags := c.run(false, "", crane, "ls", "--insecure", r.host+"/isv1/app"); !strings.Contains(tags, sigTag) {
		t.Errorf("no cosign signature tag %s in %q", sigTag, tags)
	}
	// A signature by another key does not verify.
	if err := os.Mkdir(filepath.Join(c.dir, "other"), 0o700); err != nil {
		t.Fatal(err)
	}
	c.run(false, "", cosign, "generate-key-pair", "--output-key-prefix", "other/cosign")
	c.run(true, "", cosign, "verify", "--key", "other/cosign.pub", "--insecure-ignore-tlog", "--allow-http-registry", byDigest)

	// A tenant without an entitlement can neither push nor pull.
	c.run(false, tenantPW, crane, "auth", "login", r.host, "-u", "tenant1", "--password-stdin")
	c.run(true, "", crane, "digest", "--insecure", ref)
	c.run(true, "", crane, "copy", "--insecure", r.host+"/isv1/app:copy", r.host+"/isv1/app:evil")
}

func TestClientsOras(t *testing.T) {
	oras := tool(t, "oras", installOras)
	r := start(t, server.Config{})
	r.user(t, "isv1", auth.RoleISV, isvPW)
	c := newClientEnv(t)
	ref := r.host + "/isv1/artifact:v1"
	if err := os.WriteFile(filepath.Join(c.dir, "payload.txt"), []byte("oras payload\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run(false, isvPW, oras, "login", "--plain-http", "-u", "isv1", "--password-stdin", r.host)
	c.run(false, "", oras, "push", "--plain-http", "--artifact-type", "application/vnd.faas.test", ref, "payload.txt:text/plain")
	outDir := filepath.Join(c.dir, "out")
	c.run(false, "", oras, "pull", "--plain-http", "-o", outDir, ref)
	got, err := os.ReadFile(filepath.Join(outDir, "payload.txt"))
	if err != nil || string(got) != "oras payload\n" {
		t.Fatalf("oras pull: %q %v", got, err)
	}
	// Referrers: attach an artifact to the pushed one and discover it.
	if err := os.WriteFile(filepath.Join(c.dir, "sbom.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	c.run(false, "", oras, "attach", "--plain-http", "--artifact-type", "application/vnd.faas.sbom", ref, "sbom.json:application/json")
	if out := c.run(false, "", oras, "discover", "--plain-http", "--format", "json", ref); !strings.Contains(out, "application/vnd.faas.sbom") {
		t.Errorf("oras discover: %s", out)
	}
}

// TestClientsCraneRedirect pulls with crane from a registry that redirects
// blob downloads to presigned MinIO URLs.
func TestClientsCraneRedirect(t *testing.T) {
	crane := tool(t, "crane", installCrane)
	r := start(t, redirectConfig(t))
	r.user(t, "isv1", auth.RoleISV, isvPW)
	c := newClientEnv(t)
	ref := r.host + "/isv1/app:1"
	c.run(false, isvPW, crane, "auth", "login", r.host, "-u", "isv1", "--password-stdin")
	layer := filepath.Join(c.dir, "layer.tar")
	layerTar(t, layer, map[string]string{"hello.txt": "hello through a redirect\n"})
	c.run(false, "", crane, "append", "--insecure", "-f", layer, "-t", ref)
	out := filepath.Join(c.dir, "pulled.tar")
	c.run(false, "", crane, "pull", "--insecure", ref, out)
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Fatalf("crane pull wrote nothing: %v", err)
	}
	if got := c.run(false, "", crane, "export", "--insecure", ref, "-"); !strings.Contains(got, "hello through a redirect") {
		t.Errorf("crane export: %.200q", got)
	}
	if r.redirects() == 0 {
		t.Error("no blob download was redirected")
	}
}
