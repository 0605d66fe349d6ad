package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

func runKeys(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out strings.Builder
	root := newRoot(strings.NewReader(""), &out, io.Discard)
	root.SetArgs(append([]string{"keys"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestKeysCommands(t *testing.T) {
	dir := t.TempDir() + "/keys"
	if _, err := runKeys(t, "list", "--key-dir", dir); !errors.Is(err, auth.ErrNotFound) {
		t.Fatalf("list of a missing directory: %v", err)
	}
	// The first rotate creates the first key and a second one.
	if out, err := runKeys(t, "rotate", "--key-dir", dir); err != nil || !strings.Contains(out, "added key ") {
		t.Fatalf("rotate: %q %v", out, err)
	}
	out, err := runKeys(t, "list", "--json", "--key-dir", dir, "--key-publish-delay", "1h")
	if err != nil {
		t.Fatal(err)
	}
	var keys []auth.KeyInfo
	if err := json.Unmarshal([]byte(out), &keys); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(keys) != 2 || !keys[0].Current || keys[1].Current || keys[0].Retired || keys[1].Retired {
		t.Fatalf("keys after rotate with a 1h publish delay: %+v", keys)
	}
	// The new key is not published yet: the old one still signs; retiring
	// it leaves the new one signing.
	if out, err := runKeys(t, "retire", keys[0].Kid, "--key-dir", dir, "--key-publish-delay", "1h"); err != nil ||
		!strings.Contains(out, "key "+keys[1].Kid+" signs") {
		t.Fatalf("retire: %q %v", out, err)
	}
	if _, err := runKeys(t, "retire", keys[1].Kid, "--key-dir", dir); !errors.Is(err, auth.ErrInvalid) {
		t.Errorf("retiring the last key: %v", err)
	}
	if _, err := runKeys(t, "retire", "nope", "--key-dir", dir); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("retiring an unknown key: %v", err)
	}
	out, err = runKeys(t, "list", "--key-dir", dir)
	if err != nil || !strings.Contains(out, keys[0].Kid) || !strings.Contains(out, "retired") ||
		!strings.Contains(out, keys[1].Kid) || !strings.Contains(out, "signs\n") {
		t.Errorf("list: %q %v", out, err)
	}
}
