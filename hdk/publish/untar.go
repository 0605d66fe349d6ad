package publish

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrLayoutTar marks a tar that is not a well-formed OCI image layout.
var ErrLayoutTar = errors.New("publish: not an OCI image layout tar")

// Options bound what Untar accepts, and may stream large blobs elsewhere;
// zero fields take the defaults.
type Options struct {
	// MaxBytes bounds the bytes of all files together. Default 2 GiB.
	MaxBytes int64
	// MaxFiles bounds the number of entries. Default 1024.
	MaxFiles int
	// Stream, when set, receives every blob of StreamMin bytes or more
	// instead of the folder: its digest ("sha256:…"), size and bytes,
	// which it must read to the end and check against the digest itself
	// (Untar does not hash them). A registry upload does exactly that, so
	// the bytes are hashed once and never touch the disk.
	Stream    func(ctx context.Context, digest string, size int64, r io.Reader) error
	StreamMin int64
}

const (
	defaultMaxBytes = 2 << 30
	defaultMaxFiles = 1024
	// maxMetaBytes bounds oci-layout and index.json.
	maxMetaBytes = 4 << 20
)

var blobName = regexp.MustCompile(`^blobs/(sha256/[a-f0-9]{64}|sha512/[a-f0-9]{128})$`)

// Untar writes the OCI image layout of the tar stream r into dir, which
// must exist and be empty. It accepts the layout's files at the top of the
// tar or under one folder (`tar -cf x.tar layout/`): oci-layout,
// index.json and blobs/<alg>/<hex>, regular files and folders only. Every
// blob's bytes must match its name. Anything else is an error wrapping
// ErrLayoutTar that names the entry; a partial layout may be left in dir.
func Untar(ctx context.Context, r io.Reader, dir string, lim Options) error {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = defaultMaxBytes
	}
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = defaultMaxFiles
	}
	tr := tar.NewReader(r)
	var total int64
	prefix, prefixSet := "", false
	seen := map[string]bool{}
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w: reading entry %d: %v", ErrLayoutTar, n+1, err)
		}
		if n >= lim.MaxFiles {
			return fmt.Errorf("%w: more than %d entries", ErrLayoutTar, lim.MaxFiles)
		}
		name, pre, err := entryName(h.Name)
		if err != nil {
			return err
		}
		if name == "" { // the enclosing folder itself
			if h.Typeflag != tar.TypeDir {
				return fmt.Errorf("%w: %q: not a layout file", ErrLayoutTar, h.Name)
			}
			continue
		}
		if prefixSet && pre != prefix {
			return fmt.Errorf("%w: %q is outside the layout's folder %q", ErrLayoutTar, h.Name, prefix)
		}
		prefix, prefixSet = pre, true
		switch h.Typeflag {
		case tar.TypeDir:
			if name != "blobs" && name != "blobs/sha256" && name != "blobs/sha512" {
				return fmt.Errorf("%w: %q: unexpected folder", ErrLayoutTar, h.Name)
			}
			if err := os.MkdirAll(filepath.Join(dir, filepath.FromSlash(name)), 0o700); err != nil {
				return err
			}
			continue
		case tar.TypeReg:
		default:
			return fmt.Errorf("%w: %q: only regular files and folders are allowed (type %q)", ErrLayoutTar, h.Name, h.Typeflag)
		}
		sum, err := layoutFileDigest(h, name)
		if err != nil {
			return err
		}
		if seen[name] {
			return fmt.Errorf("%w: %q appears twice", ErrLayoutTar, h.Name)
		}
		seen[name] = true
		if h.Size < 0 || total+h.Size > lim.MaxBytes {
			return fmt.Errorf("%w: larger than %d bytes", ErrLayoutTar, lim.MaxBytes)
		}
		total += h.Size
		if sum != nil && lim.Stream != nil && h.Size >= lim.StreamMin {
			if err := streamBlob(ctx, lim.Stream, name, h, tr); err != nil {
				return err
			}
			continue
		}
		if err := writeEntry(dir, name, tr, h.Size, sum); err != nil {
			var we writeError
			if errors.As(err, &we) {
				return fmt.Errorf("publish: writing %q: %w", h.Name, we.err)
			}
			return fmt.Errorf("%w: %q: %w", ErrLayoutTar, h.Name, err)
		}
	}
	for _, need := range []string{"oci-layout", "index.json"} {
		if !seen[need] {
			return fmt.Errorf("%w: no %s", ErrLayoutTar, need)
		}
	}
	return nil
}

// layoutFileDigest checks that entry h, the layout's file name, is one of
// its files and returns the hash its bytes must match for a blob; nil for
// the metadata files, which must be small.
func layoutFileDigest(h *tar.Header, name string) (hash.Hash, error) {
	switch {
	case name == "oci-layout" || name == "index.json":
		if h.Size > maxMetaBytes {
			return nil, fmt.Errorf("%w: %q: larger than %d bytes", ErrLayoutTar, h.Name, maxMetaBytes)
		}
		return nil, nil
	case blobName.MatchString(name):
		if strings.HasPrefix(name, "blobs/sha256/") {
			return sha256.New(), nil
		}
		return sha512.New(), nil
	}
	return nil, fmt.Errorf("%w: %q: not a layout file (want oci-layout, index.json or blobs/<algorithm>/<hex>)", ErrLayoutTar, h.Name)
}

// streamBlob hands the blob of entry h, the layout's file name, to stream
// instead of writing it, and checks that stream read all of it.
func streamBlob(ctx context.Context, stream func(ctx context.Context, digest string, size int64, r io.Reader) error, name string, h *tar.Header, tr io.Reader) error {
	alg, hex, _ := strings.Cut(strings.TrimPrefix(name, "blobs/"), "/")
	body := &countingReader{r: io.LimitReader(tr, h.Size)}
	if err := stream(ctx, alg+":"+hex, h.Size, body); err != nil {
		return fmt.Errorf("publish: %q: %w", h.Name, err)
	}
	if body.n != h.Size {
		return fmt.Errorf("%w: %q: truncated: %d of %d bytes", ErrLayoutTar, h.Name, body.n, h.Size)
	}
	return nil
}

// entryName splits a tar path into the layout's name and the folder it
// sits in ("" at the top). A name of "" is that folder itself.
func entryName(p string) (name, prefix string, err error) {
	p = strings.TrimPrefix(p, "./")
	clean := strings.TrimSuffix(p, "/")
	if clean == "" || clean == "." {
		return "", "", nil
	}
	if strings.Contains(p, "\\") || strings.HasPrefix(p, "/") || clean != filepath.ToSlash(filepath.Clean(clean)) ||
		strings.HasPrefix(clean, "..") {
		return "", "", fmt.Errorf("%w: %q: not a plain relative path", ErrLayoutTar, p)
	}
	first, rest, nested := strings.Cut(clean, "/")
	switch first {
	case "oci-layout", "index.json", "blobs":
		return clean, "", nil
	}
	if !nested {
		return "", first, nil
	}
	return rest, first, nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// writeError is a failure of our own disk, not of the tar.
type writeError struct{ err error }

func (e writeError) Error() string { return e.err.Error() }

type diskWriter struct{ w io.Writer }

func (d diskWriter) Write(p []byte) (int, error) {
	n, err := d.w.Write(p)
	if err != nil {
		err = writeError{err}
	}
	return n, err
}

// writeEntry copies size bytes of r into dir/name, checking them against
// the blob's name when sum is not nil. Failures of the disk are
// writeError; the others are the tar's.
func writeEntry(dir, name string, r io.Reader, size int64, sum hash.Hash) error {
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return writeError{err}
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return writeError{err}
	}
	w := io.Writer(diskWriter{f})
	if sum != nil {
		w = io.MultiWriter(f, sum)
	}
	n, err := io.Copy(w, io.LimitReader(r, size))
	if cerr := f.Close(); err == nil && cerr != nil {
		err = writeError{cerr}
	}
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("truncated: %d of %d bytes", n, size)
	}
	if sum != nil && hex.EncodeToString(sum.Sum(nil)) != filepath.Base(name) {
		return errors.New("its bytes do not match its digest (the file was altered)")
	}
	return nil
}
