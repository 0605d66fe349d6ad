package auth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
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

// TestLockoutSharedByReplicas: three Stores on one database (three
// replicas) share one account's and one source's failure budget: guesses
// spread over them lock the account on all of them after the free ones of
// one, and a success on one resets the account's count on all.
func TestLockoutSharedByReplicas(t *testing.T) {
	clock := newClock()
	lim := Limits{Now: clock.Now, Account: Backoff{Free: 3, Base: time.Minute, Max: time.Hour},
		Source: Backoff{Free: 6, Base: time.Minute, Max: time.Hour}}
	pool := testenv.RegistryDB(t)
	var replicas []*Store
	for range 3 {
		s, err := NewStore(pool, WithParams(testParams), WithLimits(lim))
		if err != nil {
			t.Fatal(err)
		}
		replicas = append(replicas, s)
	}
	ctx := context.Background()
	if _, err := replicas[0].Create(ctx, "isv1", RoleISV, "s3cret"); err != nil {
		t.Fatal(err)
	}
	// Free failures spread round-robin, then one more: locked everywhere.
	for i := range lim.Account.Free + 1 {
		if _, err := replicas[i%3].Authenticate(ctx, "isv1", "wrong"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("guess %d on replica %d: %v", i, i%3, err)
		}
	}
	for i, s := range replicas {
		if _, err := s.Authenticate(ctx, "isv1", "s3cret"); !errors.Is(err, ErrRateLimited) {
			t.Errorf("replica %d after %d failures spread over 3: %v, want ErrRateLimited", i, lim.Account.Free+1, err)
		}
	}
	clock.Advance(time.Minute)
	if _, err := replicas[1].Authenticate(ctx, "isv1", "s3cret"); err != nil {
		t.Fatalf("right password after the lockout: %v", err)
	}
	// The success on replica 1 reset the count for replica 0 too.
	for i := range lim.Account.Free {
		if _, err := replicas[0].Authenticate(ctx, "isv1", "wrong"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("free failure %d after the success: %v", i, err)
		}
	}

	// A source guessing at many accounts through different replicas.
	src := from("192.0.2.7")
	for i := range lim.Source.Free + 1 {
		if _, err := replicas[i%3].Authenticate(src, fmt.Sprintf("user%d", i), "x"); err != ErrUnauthenticated { //nolint:errorlint
			t.Fatalf("source guess %d: %v", i, err)
		}
	}
	for i, s := range replicas {
		if _, err := s.Authenticate(src, "isv1", "s3cret"); !errors.Is(err, ErrRateLimited) {
			t.Errorf("replica %d: source after %d failures spread over 3: %v, want ErrRateLimited", i, lim.Source.Free+1, err)
		}
	}
}
