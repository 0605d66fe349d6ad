package auth

import (
	"errors"
	"strings"
	"testing"
)

// testParams keep argon2id cheap in tests.
var testParams = Params{Memory: 64, Time: 1, Threads: 1, SaltLen: 16, KeyLen: 32}

func TestHashPasswordRoundTrip(t *testing.T) {
	h, err := HashPassword("correct horse", testParams)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=64,t=1,p=1$") {
		t.Fatalf("encoding %q", h)
	}
	ok, err := VerifyPassword("correct horse", h)
	if err != nil || !ok {
		t.Fatalf("verify right password: %v %v", ok, err)
	}
	ok, err = VerifyPassword("correct horsE", h)
	if err != nil || ok {
		t.Fatalf("verify wrong password: %v %v", ok, err)
	}
	h2, _ := HashPassword("correct horse", testParams)
	if h2 == h {
		t.Fatal("two hashes of one password are equal: salt not random")
	}
	p, salt, key, err := ParseHash(h)
	if err != nil || p != testParams || len(salt) != 16 || len(key) != 32 {
		t.Fatalf("parse: %+v %d %d %v", p, len(salt), len(key), err)
	}
}

func TestDefaultParamsValid(t *testing.T) {
	if err := DefaultParams.validate(); err != nil {
		t.Fatal(err)
	}
	if DefaultParams.Memory < 64*1024 {
		t.Fatal("default memory below 64 MiB")
	}
}

func TestNeedsRehash(t *testing.T) {
	h, _ := HashPassword("x", testParams)
	if NeedsRehash(h, testParams) {
		t.Fatal("same params need rehash")
	}
	stronger := testParams
	stronger.Memory = 128
	if !NeedsRehash(h, stronger) {
		t.Fatal("weaker hash does not need rehash")
	}
	if !NeedsRehash("garbage", testParams) {
		t.Fatal("garbage does not need rehash")
	}
}

func TestParseHashRejects(t *testing.T) {
	good, _ := HashPassword("pw", testParams)
	_, saltKey, _ := strings.Cut(strings.TrimPrefix(good, phcPrefix), "$")
	for name, s := range map[string]string{
		"empty":          "",
		"argon2i":        "$argon2i$v=19$m=64,t=1,p=1$" + saltKey,
		"version 16":     "$argon2id$v=16$m=64,t=1,p=1$" + saltKey,
		"param order":    phcPrefix + "t=1,m=64,p=1$" + saltKey,
		"extra param":    phcPrefix + "m=64,t=1,p=1,k=2$" + saltKey,
		"missing param":  phcPrefix + "m=64,t=1$" + saltKey,
		"leading zero":   phcPrefix + "m=064,t=1,p=1$" + saltKey,
		"sign":           phcPrefix + "m=+64,t=1,p=1$" + saltKey,
		"huge memory":    phcPrefix + "m=4294967295,t=1,p=1$" + saltKey,
		"overflow":       phcPrefix + "m=99999999999,t=1,p=1$" + saltKey,
		"memory < 8p":    phcPrefix + "m=8,t=1,p=2$" + saltKey,
		"zero time":      phcPrefix + "m=64,t=0,p=1$" + saltKey,
		"huge time":      phcPrefix + "m=64,t=1000,p=1$" + saltKey,
		"zero threads":   phcPrefix + "m=64,t=1,p=0$" + saltKey,
		"p over 255":     phcPrefix + "m=4096,t=1,p=256$" + saltKey,
		"no hash":        phcPrefix + "m=64,t=1,p=1$c2FsdHNhbHRzYWx0",
		"extra field":    good + "$x",
		"padded base64":  phcPrefix + "m=64,t=1,p=1$c2FsdHNhbHQ=$" + strings.Repeat("A", 43),
		"bad base64":     phcPrefix + "m=64,t=1,p=1$!!!!!!!!!!!$" + strings.Repeat("A", 43),
		"short salt":     phcPrefix + "m=64,t=1,p=1$c2FsdA$" + strings.Repeat("A", 43),
		"short key":      phcPrefix + "m=64,t=1,p=1$c2FsdHNhbHRzYWx0$AAAA",
		"too long":       good + strings.Repeat("A", 300),
		"trailing space": good + " ",
		"CR in salt":     phcPrefix + "m=64,t=1,p=1$c2Fsd\rHNhbHRzYWx0$" + strings.Repeat("A", 43),
		"LF in hash":     phcPrefix + "m=64,t=1,p=1$c2FsdHNhbHRzYWx0$" + strings.Repeat("A", 20) + "\n" + strings.Repeat("A", 23),
	} {
		if _, _, _, err := ParseHash(s); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: ParseHash(%q) = %v, want ErrInvalid", name, s, err)
		}
		if ok, err := VerifyPassword("pw", s); ok || err == nil {
			t.Errorf("%s: VerifyPassword accepted %q", name, s)
		}
	}
}

// FuzzParseHash: ParseHash never panics, never returns parameters outside the
// bounds, and what it accepts re-encodes to the same string.
func FuzzParseHash(f *testing.F) {
	good, _ := HashPassword("pw", testParams)
	def, _ := HashPassword("pw", Params{Memory: 1024, Time: 3, Threads: 4, SaltLen: 8, KeyLen: 64})
	for _, s := range []string{
		good, def, "", "$argon2id$", phcPrefix, phcPrefix + "m=64,t=1,p=1$$",
		phcPrefix + "m=4294967295,t=4294967295,p=255$c2FsdHNhbHQ$" + strings.Repeat("A", 43),
		phcPrefix + "m=00,t=1,p=1$c2FsdHNhbHQ$AAAA", "$argon2i$v=19$m=64,t=1,p=1$c2FsdHNhbHQ$AAAA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, salt, key, err := ParseHash(s)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		if err := p.validate(); err != nil {
			t.Fatalf("accepted out-of-bounds params %+v", p)
		}
		if got := encodeHash(p, salt, key); got != s {
			t.Fatalf("re-encoded %q as %q", s, got)
		}
	})
}

// BenchmarkHashDefault measures one login's cost under DefaultParams.
func BenchmarkHashDefault(b *testing.B) {
	h, err := HashPassword("pw", DefaultParams)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := VerifyPassword("pw", h); err != nil {
			b.Fatal(err)
		}
	}
}
