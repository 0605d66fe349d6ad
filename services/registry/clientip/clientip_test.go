package clientip

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
)

func request(remote string, hdr ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	return r
}

func TestAddr(t *testing.T) {
	trusted := Resolver{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8::/32")}}
	for _, c := range []struct {
		name   string
		res    Resolver
		remote string
		hdr    []string
		want   string
	}{
		{"no proxies: peer", Resolver{}, "192.0.2.1:5000", nil, "192.0.2.1"},
		{"no proxies: forged XFF ignored", Resolver{}, "192.0.2.1:5000", []string{"X-Forwarded-For", "203.0.113.9"}, "192.0.2.1"},
		{"no proxies: forged X-Real-IP ignored", Resolver{}, "192.0.2.1:5000", []string{"X-Real-IP", "203.0.113.9"}, "192.0.2.1"},
		{"untrusted peer: XFF ignored", trusted, "192.0.2.1:5000", []string{"X-Forwarded-For", "203.0.113.9"}, "192.0.2.1"},
		{"trusted peer: XFF client", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},
		{"client-forged left part skipped", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "1.1.1.1, 203.0.113.9"}, "203.0.113.9"},
		{"trusted hops skipped", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "1.1.1.1, 203.0.113.9, 10.2.3.4 ,10.9.9.9"}, "203.0.113.9"},
		{"several header lines", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "1.1.1.1, 203.0.113.9", "X-Forwarded-For", "10.2.3.4"}, "203.0.113.9"},
		{"all trusted: left-most", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "10.1.1.1, 10.2.2.2"}, "10.1.1.1"},
		{"garbage: last trusted before it", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9, bogus, 10.2.2.2"}, "10.2.2.2"},
		{"empty entry: last trusted", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", ""}, "10.0.0.1"},
		{"hop with port", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9:4711"}, "203.0.113.9"},
		{"IPv6 hop with port", trusted, "10.0.0.1:5000", []string{"X-Forwarded-For", "[2001:db9::1]:4711"}, "2001:db9::1"},
		{"IPv6 trusted peer", trusted, "[2001:db8::5]:5000", []string{"X-Forwarded-For", "2001:db9::1"}, "2001:db9::1"},
		{"mapped peer matches IPv4 network", trusted, "[::ffff:10.0.0.1]:5000", []string{"X-Forwarded-For", "::ffff:203.0.113.9"}, "203.0.113.9"},
		{"X-Real-IP from trusted", trusted, "10.0.0.1:5000", []string{"X-Real-IP", "203.0.113.9"}, "203.0.113.9"},
		{"X-Real-IP last value", trusted, "10.0.0.1:5000", []string{"X-Real-IP", "1.1.1.1", "X-Real-IP", "203.0.113.9"}, "203.0.113.9"},
		{"XFF wins over X-Real-IP", trusted, "10.0.0.1:5000", []string{"X-Real-IP", "1.1.1.1", "X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},
		{"unreadable X-Real-IP: peer", trusted, "10.0.0.1:5000", []string{"X-Real-IP", "nope"}, "10.0.0.1"},
		{"unix socket peer", trusted, "@", []string{"X-Forwarded-For", "203.0.113.9"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := String(c.res.Addr(request(c.remote, c.hdr...))); got != c.want {
				t.Errorf("Addr = %q, want %q", got, c.want)
			}
		})
	}
}

func TestAddrBoundsHops(t *testing.T) {
	res := Resolver{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	hops := []string{"203.0.113.9"}
	for range 2 * maxHops {
		hops = append(hops, "10.1.1.1")
	}
	// Past maxHops trusted entries the walk stops at the last one read.
	got := res.Addr(request("10.0.0.1:1", "X-Forwarded-For", strings.Join(hops, ",")))
	if got != netip.MustParseAddr("10.1.1.1") {
		t.Fatalf("Addr = %v", got)
	}
}

func TestMiddlewareAndFromRequest(t *testing.T) {
	res := Resolver{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	var got netip.Addr
	h := res.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = FromRequest(r) }))
	h.ServeHTTP(httptest.NewRecorder(), request("10.0.0.1:1", "X-Forwarded-For", "203.0.113.9"))
	if got != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("through middleware: %v", got)
	}
	// Without the middleware only the peer counts.
	if got := FromRequest(request("10.0.0.1:1", "X-Forwarded-For", "203.0.113.9")); got != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("without middleware: %v", got)
	}
	if _, ok := FromContext(context.Background()); ok {
		t.Fatal("FromContext of an empty context")
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes(" 10.1.2.3/8, 192.0.2.7 ,2001:db8::1/32,::ffff:192.0.2.0/120")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.0/8", "192.0.2.7/32", "2001:db8::/32", "192.0.2.0/24"}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("[%d] = %v, want %s", i, got[i], want[i])
		}
	}
	if p, err := ParsePrefixes(""); err != nil || p != nil {
		t.Fatalf("empty: %v %v", p, err)
	}
	for _, bad := range []string{"10.0.0.0/33", "bogus", "10.0.0.0/8,", "fe80::1%eth0", "::ffff:0.0.0.0/95", "10.0.0.0/-1"} {
		_, err := ParsePrefixes(bad)
		if !errors.Is(err, ErrPrefix) {
			t.Errorf("ParsePrefixes(%q): %v, want ErrPrefix", bad, err)
		}
	}
}

func FuzzAddr(f *testing.F) {
	for _, s := range []string{"203.0.113.9", "1.1.1.1, 10.2.3.4", "[2001:db8::1]:80, bogus", ",,,", "10.0.0.1:99999",
		"fe80::1%eth0", strings.Repeat("10.1.1.1,", 100)} {
		f.Add("10.0.0.1:5000", s, "203.0.113.7")
	}
	f.Add("@", "", "")
	res := Resolver{Trusted: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
	f.Fuzz(func(t *testing.T, remote, xff, real string) {
		r := request(remote, "X-Forwarded-For", xff, "X-Real-IP", real)
		a := res.Addr(r)
		peer, ok := parseHop(remote)
		switch {
		case !ok && a.IsValid():
			t.Fatalf("address %v without a readable peer", a)
		case ok && !res.trusted(peer) && a != peer:
			t.Fatalf("untrusted peer %v, headers believed: %v", peer, a)
		case a.IsValid() && (a.Is4In6() || a.Zone() != ""):
			t.Fatalf("not normalised: %v", a)
		}
	})
}

func FuzzParsePrefixes(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "192.0.2.7, 2001:db8::/32", "", "bogus", "::ffff:1.2.3.4/128", "1.2.3.4/0,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, err := ParsePrefixes(s)
		if err != nil {
			if !errors.Is(err, ErrPrefix) {
				t.Fatalf("error %v does not wrap ErrPrefix", err)
			}
			return
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() {
				t.Fatalf("%q: prefix %v not canonical", s, p)
			}
		}
	})
}
