package blob_test

import (
	"errors"
	"testing"

	"github.com/fpga-faas/faas/services/registry/blob"
)

func TestParseDigest(t *testing.T) {
	good := string(blob.FromBytes([]byte("x")))
	if d, err := blob.ParseDigest(good); err != nil || string(d) != good {
		t.Fatalf("ParseDigest(%q) = %q, %v", good, d, err)
	}
	for _, s := range []string{"", "sha256:", "sha256:ABC", "sha512:" + good[7:], good + "0", "sha256:" + good[8:] + "g"} {
		if _, err := blob.ParseDigest(s); !errors.Is(err, blob.ErrInvalidDigest) {
			t.Errorf("ParseDigest(%q): %v, want ErrInvalidDigest", s, err)
		}
	}
}

func TestCheckRange(t *testing.T) {
	for _, c := range []struct{ off, n, size, want int64 }{{0, -1, 10, 10}, {10, -1, 10, 0}, {3, 4, 10, 4}, {0, 0, 0, 0}} {
		if got, err := blob.CheckRange(c.off, c.n, c.size); err != nil || got != c.want {
			t.Errorf("CheckRange(%d, %d, %d) = %d, %v", c.off, c.n, c.size, got, err)
		}
	}
	for _, c := range []struct{ off, n, size int64 }{{-1, 1, 10}, {11, -1, 10}, {5, 6, 10}, {0, 1, 0}} {
		if _, err := blob.CheckRange(c.off, c.n, c.size); !errors.Is(err, blob.ErrInvalidRange) {
			t.Errorf("CheckRange(%d, %d, %d): %v", c.off, c.n, c.size, err)
		}
	}
}
