package main_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

var hdkBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hdk-test")
	if err != nil {
		panic(err)
	}
	hdkBin = filepath.Join(dir, "hdk")
	if out, err := exec.Command("go", "build", "-o", hdkBin, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// hdk runs the binary in dir and returns its stdout and exit code.
func hdk(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(hdkBin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HOME="+dir, "DOCKER_CONFIG="+dir, "COSIGN_PASSWORD=")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		t.Logf("hdk %s: exit %d: %s", strings.Join(args, " "), exit.ExitCode(), errOut.String())
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("hdk %s: %v", strings.Join(args, " "), err)
	return "", -1
}

func must(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, code := hdk(t, dir, args...)
	if code != 0 {
		t.Fatalf("hdk %s: exit %d", strings.Join(args, " "), code)
	}
	return out
}

// TestWorkflow runs the ISV's path: keygen, init, build, sign, verify, push,
// then verify and inspect from the registry.
func TestWorkflow(t *testing.T) {
	dir := t.TempDir()
	srv := httptest.NewServer(registry.New())
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	ref := u.Host + "/example/loopback:1.0.0"

	must(t, dir, "keygen", "--out", "keys")
	must(t, dir, "keygen", "--out", "other")
	must(t, dir, "init", "src")
	must(t, dir, "validate", "src")
	must(t, dir, "build", "-f", "src/image.yaml", "-o", "layout")
	must(t, dir, "validate", "layout")
	info := must(t, dir, "bit", "info", "--json", "src/loopback.bit")
	if !strings.Contains(info, `"design":"loopback"`) || !strings.Contains(info, `"partial":true`) {
		t.Errorf("bit info: %s", info)
	}
	if _, code := hdk(t, dir, "verify", "--key", "keys/isv.pub", "layout"); code != 1 {
		t.Errorf("verify before signing: exit %d, want 1", code)
	}
	must(t, dir, "sign", "--key", "keys/isv.key", "layout")
	must(t, dir, "verify", "--key", "keys/isv.pub", "layout")
	if _, code := hdk(t, dir, "verify", "--key", "other/isv.pub", "layout"); code != 1 {
		t.Errorf("verify with another ISV's key: exit %d, want 1", code)
	}

	local := must(t, dir, "inspect", "--json", "layout")
	must(t, dir, "push", "layout", ref)
	remote := must(t, dir, "inspect", "--json", ref)
	if local != remote {
		t.Errorf("inspect differs after push:\n%s\n%s", local, remote)
	}
	var s struct {
		Digest string `json:"digest"`
		Chips  []struct {
			Part string `json:"part"`
		} `json:"chips"`
	}
	if err := json.Unmarshal([]byte(remote), &s); err != nil || !strings.HasPrefix(s.Digest, "sha256:") || len(s.Chips) != 1 || s.Chips[0].Part != "xcvu9p-flgb2104-2-i" {
		t.Errorf("inspect --json: %s (%v)", remote, err)
	}
	// The signature travelled with the image.
	must(t, dir, "verify", "--key", "keys/isv.pub", ref)
	if _, code := hdk(t, dir, "verify", "--key", "other/isv.pub", ref); code != 1 {
		t.Errorf("verify from the registry with another key: exit %d, want 1", code)
	}
}

// TestSealThenSign seals an image for a recipient, signs the sealed image and
// checks what a node will later get: sealed layers only, keys kept apart.
func TestSealThenSign(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "keygen", "--out", "keys")
	must(t, dir, "recipient-keygen", "--out", "registry")
	must(t, dir, "init", "src")
	must(t, dir, "build", "-f", "src/image.yaml", "-o", "layout")
	plain := must(t, dir, "inspect", "--json", "layout")
	must(t, dir, "seal", "--recipient", "registry/recipient.pub", "layout")
	sealed := must(t, dir, "inspect", "--json", "layout")
	if plain == sealed || !strings.Contains(sealed, `"sealed":true`) {
		t.Errorf("inspect after seal: %s", sealed)
	}
	st, err := os.Stat(filepath.Join(dir, "layout.keys.json"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("keys file: %v, %v", st, err)
	}
	keys, _ := os.ReadFile(filepath.Join(dir, "layout.keys.json"))
	var lines []struct {
		Layer      string `json:"layer"`
		WrappedKey string `json:"wrapped_key"`
	}
	if err := json.Unmarshal(keys, &lines); err != nil || len(lines) != 1 || !strings.Contains(sealed, lines[0].Layer) || lines[0].WrappedKey == "" {
		t.Errorf("keys file %s (%v) does not name the sealed layer of %s", keys, err, sealed)
	}
	// Sealing again would lose the keys of the first sealing: refused.
	if _, code := hdk(t, dir, "seal", "--recipient", "registry/recipient.pub", "layout"); code != 2 {
		t.Errorf("second seal over an existing keys file: exit %d, want 2", code)
	}
	must(t, dir, "sign", "--key", "keys/isv.key", "layout")
	must(t, dir, "verify", "--key", "keys/isv.pub", "layout")
}

// TestLogin stores credentials where push and pull find them: the docker
// config.
func TestLogin(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(hdkBin, "login", "registry.example:5000", "-u", "isv", "--password-stdin")
	cmd.Env = append(os.Environ(), "DOCKER_CONFIG="+dir)
	cmd.Stdin = strings.NewReader("s3cret\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("login: %v: %s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "registry.example:5000") || !strings.Contains(string(b), `"auth"`) {
		t.Errorf("docker config after login: %s", b)
	}
	if _, code := hdk(t, dir, "login", "registry.example:5000", "-u", "isv"); code != 2 {
		t.Errorf("login without --password-stdin: exit %d, want 2", code)
	}
}

// TestAsm assembles a program, disassembles the binary and assembles that
// again: the same bytes.
func TestAsm(t *testing.T) {
	dir := t.TempDir()
	src := `# conv tile
load.inp int8 sram=0 dram=0x1000 y=4 x=16 stride=16 pad=1,1,1,1 ; push_next
load.wgt int8 sram=0 dram=0x2000 y=1 x=9 stride=9 ; push_next
gemm reset uop=0:8 iter=4,16 dst=16,1 src=0,1 wgt=1,0 ; pop_prev
store.acc int8 sram=0 dram=0x3000 y=4 x=16 stride=16 ; pop_prev push_prev
finish job=42
`
	os.WriteFile(filepath.Join(dir, "p.s"), []byte(src), 0o644)
	must(t, dir, "asm", "p.s", "-o", "p.bin")
	text := must(t, dir, "disasm", "p.bin")
	os.WriteFile(filepath.Join(dir, "q.s"), []byte(text), 0o644)
	must(t, dir, "asm", "q.s", "-o", "q.bin")
	p, _ := os.ReadFile(filepath.Join(dir, "p.bin"))
	q, _ := os.ReadFile(filepath.Join(dir, "q.bin"))
	if len(p) != 5*16 || !bytes.Equal(p, q) {
		t.Errorf("asm/disasm/asm: %d and %d bytes, equal %v\n%s", len(p), len(q), bytes.Equal(p, q), text)
	}
	os.WriteFile(filepath.Join(dir, "bad.s"), []byte("finish job=1\nload.inp int8 sram=0 dram=0x1 y=0\n"), 0o644)
	if _, code := hdk(t, dir, "asm", "bad.s", "-o", "bad.bin"); code != 1 {
		t.Errorf("asm of a bad program: exit %d, want 1", code)
	}
	os.WriteFile(filepath.Join(dir, "junk.bin"), bytes.Repeat([]byte{0xff}, 16), 0o644)
	if _, code := hdk(t, dir, "disasm", "junk.bin"); code != 1 {
		t.Errorf("disasm of an illegal instruction: exit %d, want 1", code)
	}
}

func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	must(t, dir, "init", "src")
	bit, err := os.ReadFile(filepath.Join(dir, "src", "loopback.bit"))
	if err != nil {
		t.Fatal(err)
	}
	bit[len(bit)/2] ^= 1
	os.WriteFile(filepath.Join(dir, "bad.bit"), bit, 0o644)
	if _, code := hdk(t, dir, "bit", "info", "bad.bit"); code != 1 {
		t.Errorf("bit info of a corrupted file: exit %d, want 1", code)
	}
	// A bitstream for another chip's role: validation names the code.
	yaml, _ := os.ReadFile(filepath.Join(dir, "src", "image.yaml"))
	os.WriteFile(filepath.Join(dir, "src", "image.yaml"), bytes.Replace(yaml, []byte(`version: "1.0"`), []byte(`version: "1.7"`), 1), 0o644)
	out, code := hdk(t, dir, "validate", "--json", "src")
	if code != 1 || !strings.Contains(out, "ROLE_VERSION_INCOMPATIBLE") {
		t.Errorf("validate of an image naming role version 1.7: exit %d, %s", code, out)
	}
	if _, code := hdk(t, dir, "init", "src"); code != 2 {
		t.Errorf("init over an existing scaffold: exit %d, want 2", code)
	}
	if _, code := hdk(t, dir, "build", "-f", "missing.yaml", "-o", "out"); code != 2 {
		t.Errorf("build of a missing manifest: exit %d, want 2", code)
	}
	if _, code := hdk(t, dir, "inspect"); code != 2 {
		t.Errorf("inspect without an argument: exit %d, want 2", code)
	}
}
