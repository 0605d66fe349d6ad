package webhooks

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrAddress: a webhook URL, or the address it resolves to, is not one
// deliveries may go to.
var ErrAddress = errors.New("webhooks: address refused")

// MaxURLLength bounds a webhook URL.
const MaxURLLength = 2048

// CheckURL says whether raw may be registered as a webhook: an absolute
// https URL without credentials, or http to a loopback host when
// allowLoopback. A host that is an IP literal must be a public address
// (loopback too when allowLoopback); names are checked when a delivery
// connects, against what they resolve to then.
func CheckURL(raw string, allowLoopback bool) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("%w: URL over %d bytes", ErrAddress, MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return fmt.Errorf("%w: not an absolute URL", ErrAddress)
	}
	if u.User != nil {
		return fmt.Errorf("%w: credentials in the URL", ErrAddress)
	}
	if u.Fragment != "" {
		return fmt.Errorf("%w: a fragment in the URL", ErrAddress)
	}
	host := u.Hostname()
	loopback := strings.EqualFold(host, "localhost")
	if ip, err := netip.ParseAddr(host); err == nil {
		loopback = ip.Unmap().IsLoopback()
		if err := checkIP(ip, allowLoopback); err != nil {
			return err
		}
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowLoopback && loopback:
	default:
		return fmt.Errorf("%w: the URL must be https", ErrAddress)
	}
	if loopback && !allowLoopback {
		return fmt.Errorf("%w: loopback", ErrAddress)
	}
	return nil
}

// cgnat is the shared address space of carrier-grade NAT (RFC 6598),
// internal to a provider's network.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// checkIP refuses addresses of the registry's own host and networks.
func checkIP(ip netip.Addr, allowLoopback bool) error {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		if allowLoopback {
			return nil
		}
		return fmt.Errorf("%w: %s is loopback", ErrAddress, ip)
	case ip.IsPrivate(), cgnat.Contains(ip):
		return fmt.Errorf("%w: %s is private", ErrAddress, ip)
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsInterfaceLocalMulticast():
		return fmt.Errorf("%w: %s is link-local", ErrAddress, ip)
	case ip.IsUnspecified(), ip.IsMulticast(), !ip.IsValid(), ip.Is4() && ip.As4()[0] == 0:
		return fmt.Errorf("%w: %s is not a unicast address", ErrAddress, ip)
	}
	return nil
}

// newClient returns the HTTP client of deliveries: the address check runs
// on the address actually dialled (after DNS), redirects are answers, not
// followed, and no proxy is used, so that the check sees the real peer.
func newClient(timeout time.Duration, allowLoopback bool) *http.Client {
	d := &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %s", ErrAddress, address)
			}
			return checkIP(ap.Addr(), allowLoopback)
		},
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           d.DialContext,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       30 * time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
