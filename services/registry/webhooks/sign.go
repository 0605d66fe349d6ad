package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SignatureHeader carries a delivery's signature.
const SignatureHeader = "Faas-Signature"

// DefaultTolerance is how old a signed timestamp Verify accepts by
// default: long enough for clock skew and a slow network, short enough
// that a captured delivery cannot be replayed later.
const DefaultTolerance = 5 * time.Minute

// Errors of Verify.
var (
	ErrNoSignature = errors.New("webhooks: no valid signature header")
	ErrSignature   = errors.New("webhooks: signature does not match")
	ErrTimestamp   = errors.New("webhooks: signature timestamp outside the tolerance")
)

// Sign returns the Faas-Signature header value of body sent at t.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a Faas-Signature header against body as a receiver does:
// one of its v1 signatures must be the HMAC of its timestamp and body
// under secret (compared in constant time), and the timestamp within
// tolerance of now (DefaultTolerance when tolerance is 0). Several v1
// entries are accepted so that a sender could sign with two secrets while
// one replaces the other.
func Verify(header, secret string, body []byte, tolerance time.Duration, now time.Time) error {
	if tolerance <= 0 {
		tolerance = DefaultTolerance
	}
	var ts string
	var sigs [][]byte
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case !ok:
		case k == "t":
			ts = v
		case k == "v1":
			if b, err := hex.DecodeString(v); err == nil && len(b) == sha256.Size {
				sigs = append(sigs, b)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrNoSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: %s from now", ErrTimestamp, d.Round(time.Second))
	}
	want := mac(secret, ts, body)
	for _, s := range sigs {
		if hmac.Equal(s, want) {
			return nil
		}
	}
	return ErrSignature
}
