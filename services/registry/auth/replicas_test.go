package auth

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestReplicasShareKeysAcrossRotation: two replicas (keyrings) on one key
// directory, an operator rotating and retiring keys in it. A token of
// replica A is accepted by replica B before, during and after the
// rotation, because the new key signs only after the publish delay, by
// when B has reloaded the directory; the retired key stops verifying on
// both.
func TestReplicasShareKeysAcrossRotation(t *testing.T) {
	const delay = 2 * time.Minute
	clock := newClock()
	dir := filepath.Join(t.TempDir(), "keys")
	opts := []KeyringOption{WithPublishDelay(delay), withClock(clock.Now)}
	a, err := LoadKeyring(dir, testIssuer, opts...) // the first replica creates the first key
	if err != nil {
		t.Fatal(err)
	}
	b, err := ReadKeyring(dir, testIssuer, opts...)
	if err != nil {
		t.Fatal(err)
	}
	first := a.Current()
	if b.Current() != first {
		t.Fatalf("replicas sign with %s and %s", first, b.Current())
	}
	crossCheck := func(when string, wantKid string) {
		t.Helper()
		for _, p := range []struct {
			name     string
			from, to *Keyring
		}{{"A→B", a, b}, {"B→A", b, a}} {
			tok, _, err := p.from.Issue("isv1", testService, nil, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.to.Verify(tok, testService); err != nil {
				t.Errorf("%s: %s token refused: %v", when, p.name, err)
			}
			if p.from.Current() != wantKid {
				t.Errorf("%s: %s signs with %s, want %s", when, p.name, p.from.Current(), wantKid)
			}
		}
	}
	crossCheck("before the rotation", first)
	oldTok, _, _ := a.Issue("isv1", testService, nil, 10*time.Minute)

	// The operator rotates (as `registry keys rotate` does). Only A has
	// reloaded so far: A must not sign with the new key, which B does not
	// know yet.
	op, err := ReadKeyring(dir, testIssuer, opts...)
	if err != nil {
		t.Fatal(err)
	}
	second, err := op.Rotate()
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(dir); err != nil {
		t.Fatal(err)
	}
	crossCheck("right after the rotation, B not reloaded", first)
	clock.Advance(30 * time.Second)
	if err := b.Reload(dir); err != nil {
		t.Fatal(err)
	}
	crossCheck("both reloaded, key not yet published", first)
	clock.Advance(delay)
	crossCheck("after the publish delay", second)
	if _, err := b.Verify(oldTok, testService); err != nil {
		t.Errorf("token of the old key after the rotation: %v", err)
	}

	// The operator retires the old key; once reloaded, neither accepts it.
	if err := op.Retire(first); err != nil {
		t.Fatal(err)
	}
	if err := op.Save(dir); err != nil {
		t.Fatal(err)
	}
	for _, k := range []*Keyring{a, b} {
		if err := k.Reload(dir); err != nil {
			t.Fatal(err)
		}
		if _, err := k.Verify(oldTok, testService); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("token of the retired key accepted: %v", err)
		}
	}
	crossCheck("after the retirement", second)
	infos := a.Keys()
	if len(infos) != 2 || infos[0].Kid != first || !infos[0].Retired || infos[1].Kid != second || !infos[1].Current ||
		!infos[1].SignsFrom.Equal(infos[1].Created.Add(delay)) {
		t.Errorf("keys: %+v", infos)
	}

	// A key file removed from the directory stops verifying too.
	third, _ := op.Rotate()
	if err := op.Save(dir); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(dir); err != nil {
		t.Fatal(err)
	}
	clock.Advance(delay)
	tok3, _, _ := b.Issue("isv1", testService, nil, time.Minute)
	if b.Current() != third {
		t.Fatalf("B signs with %s, want %s", b.Current(), third)
	}
	if err := os.Remove(filepath.Join(dir, third+keyFileSuffix)); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verify(tok3, testService); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("token of a removed key accepted: %v", err)
	}
}

// TestReloadKeepsKeysOnBadDirectory: a directory that is gone, holds a bad
// file or only retired keys leaves the ring as it was.
func TestReloadKeepsKeysOnBadDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k, err := LoadKeyring(dir, testIssuer)
	if err != nil {
		t.Fatal(err)
	}
	kid := k.Current()
	tok, _, _ := k.Issue("a", testService, nil, time.Minute)
	check := func(what string, wantNotFound bool) {
		t.Helper()
		err := k.Reload(dir)
		if err == nil || errors.Is(err, ErrNotFound) != wantNotFound {
			t.Errorf("%s: reload: %v", what, err)
		}
		if k.Current() != kid {
			t.Errorf("%s: current %s, want %s", what, k.Current(), kid)
		}
		if _, err := k.Verify(tok, testService); err != nil {
			t.Errorf("%s: token refused: %v", what, err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("bad file", false)
	os.Remove(filepath.Join(dir, "bad.pem"))

	other, _ := ReadKeyring(dir, testIssuer)
	other.keys[0].retired = true
	if err := other.Save(dir); err != nil {
		t.Fatal(err)
	}
	check("only retired keys", true)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	check("missing directory", true)
	if _, err := ReadKeyring(dir, testIssuer); !errors.Is(err, ErrNotFound) {
		t.Errorf("ReadKeyring of a missing directory: %v", err)
	}
}
