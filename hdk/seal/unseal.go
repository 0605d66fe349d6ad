package seal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"runtime"
	"sync"
)

// unsealBudget bounds the chunk buffers of one Unseal call.
const unsealBudget = 256 << 20

// job is one chunk travelling through the Unseal pipeline.
type job struct {
	i    int64
	buf  []byte     // ciphertext, decrypted in place
	err  error      // set by the reader if the chunk could not be read
	done chan error // receives the decryption result; capacity 1
}

// Unseal decrypts the sealed blob in src under key and writes its plaintext
// to dst, decrypting up to workers chunks concurrently (workers < 1 means
// GOMAXPROCS). Chunks are read in order by one goroutine, authenticated and
// decrypted by the workers, and hashed and written in order by the calling
// goroutine, so reading, decryption and hashing overlap.
//
// Like [Reader], Unseal writes only authenticated chunks, and the output is
// complete and correct only if Unseal returns nil; on error whatever was
// written must be discarded. The digest and trailing-data checks run before
// the last chunk is written.
//
// On cancellation or error Unseal stops the pipeline and waits for its
// goroutines, which includes waiting for a src.Read in progress to return.
func Unseal(ctx context.Context, dst io.Writer, src io.Reader, key DataKey, workers int) (Header, error) {
	h, err := ParseHeader(src)
	if err != nil {
		return Header{}, err
	}
	k, err := authenticate(key, &h)
	if err != nil {
		return Header{}, err
	}
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	// At most inflight chunks are buffered at once: two per worker keeps
	// every worker busy while the writer drains the oldest one, within a
	// memory budget that matters only for very large chunks.
	bufSize := h.chunkLen(0) + TagSize
	inflight := int(min(int64(min(2*workers, max(2, unsealBudget/bufSize))), h.ChunkCount))
	workers = min(workers, inflight)

	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // runs after cancel: no goroutine outlives Unseal
	defer cancel()

	order := make(chan *job, inflight)
	work := make(chan *job, inflight)
	pool := make(chan []byte, inflight+1)
	for range cap(pool) {
		pool <- make([]byte, bufSize)
	}

	wg.Add(1)
	go func() {
		defer wg.Done()
		readChunks(ctx, src, &h, pool, order, work)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			openChunks(ctx, k, &h, work)
		}()
	}

	d := sha256.New()
	for j := range order {
		if j.err != nil {
			return Header{}, j.err
		}
		var err error
		select {
		case err = <-j.done:
		case <-ctx.Done():
			return Header{}, ctx.Err()
		}
		if err != nil {
			return Header{}, err
		}
		pt := j.buf[:len(j.buf)-TagSize]
		d.Write(pt)
		if j.i == h.ChunkCount-1 {
			if err := finish(d, &h, eofReader{}); err != nil {
				return Header{}, err
			}
		}
		if _, err := dst.Write(pt); err != nil {
			return Header{}, err
		}
		pool <- j.buf[:cap(j.buf)]
	}
	if err := ctx.Err(); err != nil {
		return Header{}, err
	}
	return h, nil
}

// readChunks reads h's chunks from src into buffers from pool and queues
// each in order, for the writer, and on work, for the workers; a chunk
// that could not be read, or is followed by trailing data, carries the
// error and ends the reading. It closes order and work when done.
func readChunks(ctx context.Context, src io.Reader, h *Header, pool <-chan []byte, order, work chan<- *job) {
	defer close(order)
	defer close(work)
	for i := int64(0); i < h.ChunkCount; i++ {
		var buf []byte
		select {
		case buf = <-pool:
		case <-ctx.Done():
			return
		}
		j := &job{i: i, buf: buf[:h.chunkLen(i)+TagSize], done: make(chan error, 1)}
		if _, err := io.ReadFull(src, j.buf); err != nil {
			j.err = readErr(i, err)
		} else if i == h.ChunkCount-1 {
			j.err = checkTrailing(h, src)
		}
		select {
		case order <- j:
		case <-ctx.Done():
			return
		}
		if j.err != nil {
			return
		}
		select {
		case work <- j:
		case <-ctx.Done():
			return
		}
	}
}

// openChunks decrypts and authenticates the chunks of work in place and
// reports each one's outcome on its done.
func openChunks(ctx context.Context, k *keys, h *Header, work <-chan *job) {
	aead := k.aead()
	for j := range work {
		if ctx.Err() != nil {
			return
		}
		last := j.i == h.ChunkCount-1
		_, err := aead.Open(j.buf[:0], k.nonce(j.i, last), j.buf, k.aad(j.i, last))
		if err != nil {
			err = fmt.Errorf("%w: chunk %d", ErrAuth, j.i)
		}
		j.done <- err
	}
}

// eofReader is empty; the reader goroutine has already checked for trailing
// data, so finish only needs to compare digests.
type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }
