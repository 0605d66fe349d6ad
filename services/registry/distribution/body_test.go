package distribution

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"
)

// A body the registry reads slowly (busy elsewhere between reads) is not
// the client's fault: only time spent waiting in Read counts.
func TestSlowBodyReaderCountsOnlyWaiting(t *testing.T) {
	interrupted := make(chan struct{}, 1)
	b := newSlowBodyReader(bytes.NewReader(make([]byte, 100)), 1000, 20*time.Millisecond, func() { interrupted <- struct{}{} })
	defer b.stop()
	p := make([]byte, 10)
	for {
		_, err := b.Read(p)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // the registry is busy
	}
	select {
	case <-interrupted:
		t.Fatal("a body the registry was slow to read was cut")
	default:
	}
}

// A client that stops sending is cut: the waiting Read is interrupted.
func TestSlowBodyReaderCutsStall(t *testing.T) {
	pr, pw := io.Pipe()
	defer pw.Close()
	b := newSlowBodyReader(pr, 1000, 20*time.Millisecond, func() { pr.CloseWithError(errors.New("deadline")) })
	defer b.stop()
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(b); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, errBodyTooSlow) {
			t.Fatalf("Read of a stalled body: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a stalled body was not cut")
	}
}

// FuzzParseByteRange: what parseByteRange accepts lies within the blob.
func FuzzParseByteRange(f *testing.F) {
	for _, s := range []string{"bytes=0-0", "bytes=5-", "bytes=-3", "bytes=1-2,4-5", "bytes=9-1", "items=0-1", "bytes= 3 - 4", "bytes=-0"} {
		f.Add(s, int64(10))
	}
	f.Fuzz(func(t *testing.T, h string, size int64) {
		if size < 0 {
			return
		}
		first, last, ok := parseByteRange(h, size)
		if ok && (first < 0 || last < first || last >= size) {
			t.Fatalf("parseByteRange(%q, %d) = %d, %d", h, size, first, last)
		}
	})
}
