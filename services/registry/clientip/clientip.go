// Package clientip works out the network address of an HTTP request's
// client: the socket peer, or, when the peer is a reverse proxy the operator
// trusts, the address that proxy reports in X-Forwarded-For (or X-Real-IP).
//
// Forwarding headers from any other peer are ignored. Anyone can send them,
// so believing them would let a client write any address it likes into the
// audit log and slip out of per-address rate limits.
//
// The registry's server computes the address once per request
// (Resolver.Middleware) and everything downstream reads it with FromRequest
// or FromContext.
package clientip

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// maxHops bounds how many X-Forwarded-For entries Resolver.Addr walks, so
// that a header of thousands of trusted addresses costs little.
const maxHops = 32

// Resolver computes client addresses.
type Resolver struct {
	// Trusted lists the networks of the reverse proxies whose forwarding
	// headers are believed. Empty (the default): none; the client is
	// always the socket peer.
	Trusted []netip.Prefix
}

// Addr returns the address of r's client:
//
//   - the socket peer (r.RemoteAddr), unless the peer is in Trusted;
//   - from a trusted peer, the right-most address of X-Forwarded-For that
//     is not itself trusted: every address to its right was appended by a
//     proxy we trust, so it is the first hop nobody we trust can vouch
//     beyond. When every entry is trusted, the left-most; when an entry is
//     unreadable, the last trusted address before it;
//   - from a trusted peer without X-Forwarded-For, X-Real-IP when it holds
//     an address.
//
// IPv4-mapped IPv6 addresses are unmapped and zones dropped. The zero Addr
// is returned only when r.RemoteAddr is not an IP address and port (as for
// requests over a Unix socket).
func (res Resolver) Addr(r *http.Request) netip.Addr {
	peer, ok := parseHop(r.RemoteAddr)
	if !ok || !res.trusted(peer) {
		return peer
	}
	if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
		return res.walk(xff, peer)
	}
	if xr := r.Header.Values("X-Real-IP"); len(xr) > 0 {
		// The last value: a proxy that appends rather than replaces puts
		// its own after the client's.
		if a, ok := parseHop(strings.TrimSpace(xr[len(xr)-1])); ok {
			return a
		}
	}
	return peer
}

// walk reads X-Forwarded-For values (a comma-separated list, possibly split
// over several header lines) from the right.
func (res Resolver) walk(values []string, peer netip.Addr) netip.Addr {
	last, hops := peer, 0
	for i := len(values) - 1; i >= 0; i-- {
		v := values[i]
		for {
			j := strings.LastIndexByte(v, ',')
			a, ok := parseHop(strings.TrimSpace(v[j+1:]))
			if !ok {
				return last
			}
			if !res.trusted(a) {
				return a
			}
			last = a
			if hops++; hops == maxHops || j < 0 {
				break
			}
			v = v[:j]
		}
		if hops == maxHops {
			break
		}
	}
	return last
}

func (res Resolver) trusted(a netip.Addr) bool {
	for _, p := range res.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseHop reads an address, with or without a port ("192.0.2.1",
// "192.0.2.1:443", "2001:db8::1", "[2001:db8::1]:443").
func parseHop(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		ap, err := netip.ParseAddrPort(s)
		if err != nil {
			return netip.Addr{}, false
		}
		a = ap.Addr()
	}
	return a.Unmap().WithZone(""), true
}

// Middleware stores the client address of each request (Addr) in its
// context for FromRequest and FromContext.
func (res Resolver) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(NewContext(r.Context(), res.Addr(r))))
	})
}

type ctxKey struct{}

// NewContext returns a copy of ctx that carries the client address a.
func NewContext(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, ctxKey{}, a)
}

// FromContext returns the client address NewContext stored in ctx.
func FromContext(ctx context.Context) (netip.Addr, bool) {
	a, ok := ctx.Value(ctxKey{}).(netip.Addr)
	return a, ok && a.IsValid()
}

// FromRequest returns the client address the middleware stored in r's
// context or, when there is none, r's socket peer (no header is trusted).
// It is the zero Addr when neither is an IP address.
func FromRequest(r *http.Request) netip.Addr {
	if a, ok := FromContext(r.Context()); ok {
		return a
	}
	return Resolver{}.Addr(r)
}

// String formats a for a log or audit record: "" for the zero Addr.
func String(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// ErrPrefix marks an unreadable list of networks.
var ErrPrefix = errors.New("clientip: invalid network")

// ParsePrefixes reads a comma-separated list of networks in CIDR notation or
// single addresses ("10.0.0.0/8, 192.0.2.7, 2001:db8::/32"), as given to
// the registry's --trusted-proxies. Host bits are cleared ("10.1.2.3/8" is
// 10.0.0.0/8). An empty string is an empty list; an unreadable entry is an
// error wrapping ErrPrefix that names it.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		var p netip.Prefix
		if strings.Contains(item, "/") {
			var err error
			if p, err = netip.ParsePrefix(item); err != nil {
				return nil, fmt.Errorf("%w: %q: want an address or CIDR network such as 10.0.0.0/8", ErrPrefix, item)
			}
		} else {
			a, err := netip.ParseAddr(item)
			if err != nil || a.Zone() != "" {
				return nil, fmt.Errorf("%w: %q: want an address or CIDR network such as 10.0.0.0/8", ErrPrefix, item)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if p.Addr().Is4In6() {
			// Requests arrive unmapped (parseHop), so match them as IPv4.
			bits := p.Bits() - 96
			if bits < 0 {
				return nil, fmt.Errorf("%w: %q: an IPv4-mapped network shorter than /96", ErrPrefix, item)
			}
			p = netip.PrefixFrom(p.Addr().Unmap(), bits)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
