package sign

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const cosignInstall = "go install github.com/sigstore/cosign/v2/cmd/cosign@v2.6.5"

// cosignBinary finds cosign on $PATH or in $(go env GOPATH)/bin. Without it
// the interop test is skipped, except under CI=true where it fails.
func cosignBinary(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("cosign"); err == nil {
		return p
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, dir := range filepath.SplitList(strings.TrimSpace(string(out))) {
			p := filepath.Join(dir, "bin", "cosign")
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("cosign not found on $PATH or in $(go env GOPATH)/bin; run: %s", cosignInstall)
	}
	t.Skipf("cosign not found; to run this test: %s", cosignInstall)
	return ""
}

// runCosign runs cosign offline-friendly: own HOME (no user config or TUF
// cache), password from COSIGN_PASSWORD.
func runCosign(t *testing.T, bin, dir string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "COSIGN_PASSWORD=interop-pw", "TUF_ROOT="+filepath.Join(dir, "tuf"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCosignInterop(t *testing.T) {
	bin := cosignBinary(t)
	ctx := context.Background()
	host := newRegistry(t) // plain HTTP on 127.0.0.1
	dir := t.TempDir()
	// cosign v2.6.5 treats 127.0.0.1 as plain HTTP by itself (go-containerregistry's
	// loopback rule); the registry flags make that explicit and would be needed
	// for a non-loopback HTTP registry. --insecure-ignore-tlog=true is required:
	// without it cosign verify fetches Rekor keys over TUF from the internet.
	// --tlog-upload=false keeps cosign sign offline; --yes skips its prompt.
	registryFlags := []string{"--allow-insecure-registry", "--allow-http-registry"}
	verifyFlags := append([]string{"verify", "--insecure-ignore-tlog=true"}, registryFlags...)
	signFlags := append([]string{"sign", "--tlog-upload=false", "--yes"}, registryFlags...)

	t.Run("our signature, cosign verify", func(t *testing.T) {
		ref := pushImage(t, host, "ours")
		key := newKey(t)
		if err := Sign(ctx, ref, key); err != nil {
			t.Fatal(err)
		}
		pub, err := MarshalPublicKey(key.Public())
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "ours.pub"), pub)
		out, err := runCosign(t, bin, dir, append(verifyFlags, "--key", "ours.pub", ref.String())...)
		if err != nil {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
		if !strings.Contains(out, ref.DigestStr()) {
			t.Errorf("cosign verify output does not mention %s:\n%s", ref.DigestStr(), out)
		}

		other, err := MarshalPublicKey(newKey(t).Public())
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "other.pub"), other)
		if out, err := runCosign(t, bin, dir, append(verifyFlags, "--key", "other.pub", ref.String())...); err == nil {
			t.Errorf("cosign verify with another key succeeded:\n%s", out)
		}
	})

	t.Run("cosign signature with our key file, our verify", func(t *testing.T) {
		ref := pushImage(t, host, "theirs")
		key := newKey(t)
		enc, err := MarshalEncryptedPrivateKey(key, []byte("interop-pw"))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "ours.key"), enc)
		out, err := runCosign(t, bin, dir, append(signFlags, "--key", "ours.key", ref.String())...)
		if err != nil {
			t.Fatalf("cosign sign: %v\n%s", err, out)
		}
		sigs, err := Verify(ctx, ref, pubs(key))
		if err != nil {
			t.Fatal(err)
		}
		if len(sigs) != 1 || sigs[0].Payload.Critical.Identity.DockerReference != ref.Context().Name() {
			t.Errorf("signatures = %+v", sigs)
		}
		if _, err := Verify(ctx, ref, pubs(newKey(t))); !errors.Is(err, ErrBadSignature) {
			t.Errorf("Verify with another key = %v, want ErrBadSignature", err)
		}
		// Appending: our signature joins cosign's in the same .sig image.
		if err := Sign(ctx, ref, newKey(t)); err != nil {
			t.Fatal(err)
		}
		if n := len(sigLayers(t, ref)); n != 2 {
			t.Errorf("signature image has %d layers after our Sign, want 2", n)
		}
		if out, err := runCosign(t, bin, dir, append(verifyFlags, "--key", "ours.pub", ref.String())...); err == nil {
			t.Errorf("cosign verify with an unrelated key succeeded:\n%s", out)
		}
	})

	t.Run("cosign generate-key-pair, our Sign, cosign verify", func(t *testing.T) {
		kdir := t.TempDir()
		out, err := runCosign(t, bin, kdir, "generate-key-pair")
		if err != nil {
			t.Fatalf("cosign generate-key-pair: %v\n%s", err, out)
		}
		privPEM, err := os.ReadFile(filepath.Join(kdir, "cosign.key"))
		if err != nil {
			t.Fatal(err)
		}
		pubPEM, err := os.ReadFile(filepath.Join(kdir, "cosign.pub"))
		if err != nil {
			t.Fatal(err)
		}
		t.Setenv(PasswordEnv, "interop-pw")
		key, err := LoadPrivateKey(privPEM, EnvPassword)
		if err != nil {
			t.Fatal(err)
		}
		pub, err := LoadPublicKey(pubPEM)
		if err != nil {
			t.Fatal(err)
		}
		if !pub.Equal(key.Public()) {
			t.Fatal("cosign.pub does not match cosign.key")
		}
		if _, err := LoadPrivateKey(privPEM, func() ([]byte, error) { return []byte("nope"), nil }); !errors.Is(err, ErrWrongPassword) {
			t.Errorf("LoadPrivateKey(cosign.key, wrong password) = %v, want ErrWrongPassword", err)
		}

		ref := pushImage(t, host, "cosignkey")
		if err := Sign(ctx, ref, key); err != nil {
			t.Fatal(err)
		}
		if out, err := runCosign(t, bin, kdir, append(verifyFlags, "--key", "cosign.pub", ref.String())...); err != nil {
			t.Fatalf("cosign verify: %v\n%s", err, out)
		}
		if _, err := Verify(ctx, ref, []crypto.PublicKey{pub}); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMakefilePinsCosign keeps `make tools` installing the cosign this test
// names.
func TestMakefilePinsCosign(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	module := strings.TrimPrefix(cosignInstall, "go install ")
	if !strings.Contains(string(mk), "COSIGN_MODULE := "+module) {
		t.Errorf("Makefile does not pin %s (COSIGN_MODULE)", module)
	}
}
