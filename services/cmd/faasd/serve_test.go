package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/services/agent/mirror"
	"github.com/fpga-faas/faas/shell"
)

// TestServeRefusesBadMirror: a --registry-mirror that is not a plain
// http(s) base URL stops faasd before it touches a board or the registry.
func TestServeRefusesBadMirror(t *testing.T) {
	dir := t.TempDir()
	trust := trustKey(t, dir)
	t.Setenv("FAAS_NODE_TOKEN", "faas_node")
	for _, m := range []string{"http://user:secret@127.0.0.1:65001", "127.0.0.1:65001", "http://127.0.0.1:65001/v2"} {
		cmd := serveCommand()
		cmd.SetArgs([]string{"--registry", "http://127.0.0.1:1", "--node-user", "node1", "--trust-key", trust,
			"--state-dir", filepath.Join(dir, "state"), "--sim", "1", "--registry-mirror", "http://127.0.0.1:65001", "--registry-mirror", m})
		cmd.SetOut(new(nopWriter))
		cmd.SetErr(new(nopWriter))
		err := cmd.ExecuteContext(context.Background())
		if !errors.Is(err, mirror.ErrBadURL) || !strings.Contains(err.Error(), "--registry-mirror") {
			t.Errorf("serve --registry-mirror %s: %v, want ErrBadURL naming the flag", m, err)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the URL's password: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Errorf("state dir: %v, want none made", err)
	}
}

// TestSimOverheat: --sim-overheat runs the named slots' simulated chips
// over their temperature limit, and refuses a slot the boards lack.
func TestSimOverheat(t *testing.T) {
	f := serveFlags{sim: 2, simModel: shell.ModelVU9PDual.Name, stateDir: t.TempDir(), simOverheat: []int{1}}
	bs, err := openBoardsForServe(serveCommand(), f)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, b := range bs {
			b.Close()
		}
	}()
	for slot := range 4 {
		se, err := bs[slot/2].Chips[slot%2].Sensors()
		if err != nil {
			t.Fatal(err)
		}
		if hot := se.TempC >= se.TempLimitC; hot != (slot == 1) {
			t.Errorf("slot %d: %.1f °C, limit %.1f °C; want over the limit only on slot 1", slot, se.TempC, se.TempLimitC)
		}
	}
	f.simOverheat = []int{4}
	if _, err := openBoardsForServe(serveCommand(), f); err == nil || !strings.Contains(err.Error(), "--sim-overheat 4") {
		t.Errorf("--sim-overheat 4 on two boards: %v, want an error naming it", err)
	}
}

// TestServeShareFlags: --share-image needs the device plugin and a token
// of the account that loads it, and --share-idle must be positive; each
// mistake stops faasd before it touches a board, naming the flag.
func TestServeShareFlags(t *testing.T) {
	dir := t.TempDir()
	trust := trustKey(t, dir)
	t.Setenv("FAAS_NODE_TOKEN", "faas_node")
	t.Setenv("FAAS_SHARE_TOKEN", "")
	base := []string{"--registry", "http://127.0.0.1:1", "--node-user", "node1", "--trust-key", trust,
		"--state-dir", filepath.Join(dir, "state"), "--sim", "1"}
	plugin := []string{"--device-plugin", "--pod-socket", filepath.Join(dir, "pods", "faasd.sock")}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--share-image", "r/acme/alidnn:1"}, "--share-image needs --device-plugin"},
		{append(plugin, "--share-image", "r/acme/alidnn:1"), "--share-token-file or $FAAS_SHARE_TOKEN"},
		{append(plugin, "--share-idle", "0s"), "--share-idle 0s"},
	} {
		cmd := serveCommand()
		cmd.SetArgs(append(append([]string{}, base...), c.args...))
		cmd.SetOut(new(nopWriter))
		cmd.SetErr(new(nopWriter))
		if err := cmd.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve %q: %v, want an error naming %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Errorf("state dir: %v, want none made", err)
	}
}

// trustKey writes a platform public key into dir for --trust-key.
func trustKey(t *testing.T, dir string) string {
	t.Helper()
	k, err := sign.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := sign.MarshalPublicKey(k.Public())
	trust := filepath.Join(dir, "platform.pub")
	if err := os.WriteFile(trust, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return trust
}
