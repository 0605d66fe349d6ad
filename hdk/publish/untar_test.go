package publish

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type entry struct {
	name string
	body string
	typ  byte
}

func tarOf(t testing.TB, entries ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		typ := e.typ
		if typ == 0 {
			typ = tar.TypeReg
		}
		h := &tar.Header{Name: e.name, Typeflag: typ, Mode: 0o644, Size: int64(len(e.body))}
		if typ != tar.TypeReg {
			h.Size = 0
		}
		if typ == tar.TypeSymlink {
			h.Linkname = "/etc/passwd"
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func blob(body string) entry {
	sum := sha256.Sum256([]byte(body))
	return entry{name: "blobs/sha256/" + hex.EncodeToString(sum[:]), body: body}
}

var (
	ociLayout = entry{name: "oci-layout", body: `{"imageLayoutVersion":"1.0.0"}`}
	index     = entry{name: "index.json", body: `{"schemaVersion":2,"manifests":[]}`}
)

func TestUntar(t *testing.T) {
	b := blob("bitstream bytes")
	for name, c := range map[string]struct {
		entries []entry
		want    string // "" accepts
	}{
		"top level":       {[]entry{ociLayout, index, {name: "blobs/", typ: tar.TypeDir}, {name: "blobs/sha256/", typ: tar.TypeDir}, b}, ""},
		"under a folder":  {[]entry{{name: "layout/", typ: tar.TypeDir}, {name: "layout/oci-layout", body: ociLayout.body}, {name: "layout/index.json", body: index.body}, {name: "layout/" + b.name, body: b.body}}, ""},
		"dot slash":       {[]entry{{name: "./oci-layout", body: ociLayout.body}, {name: "./index.json", body: index.body}}, ""},
		"two folders":     {[]entry{{name: "a/oci-layout", body: ociLayout.body}, {name: "b/index.json", body: index.body}}, `outside the layout's folder`},
		"traversal":       {[]entry{ociLayout, {name: "../index.json", body: index.body}}, "not a plain relative path"},
		"absolute":        {[]entry{{name: "/oci-layout", body: ociLayout.body}}, "not a plain relative path"},
		"symlink":         {[]entry{ociLayout, {name: "index.json", typ: tar.TypeSymlink}}, "only regular files"},
		"stranger":        {[]entry{ociLayout, index, {name: "run.sh", body: "rm -rf /"}}, "not a layout file"},
		"tampered blob":   {[]entry{ociLayout, index, {name: b.name, body: "bitstream bytez"}}, "do not match its digest"},
		"duplicate":       {[]entry{ociLayout, index, index}, "appears twice"},
		"no index":        {[]entry{ociLayout}, "no index.json"},
		"bad blob name":   {[]entry{ociLayout, index, {name: "blobs/md5/abc", body: "x"}}, "not a layout file"},
		"nested too deep": {[]entry{{name: "a/b/oci-layout", body: ociLayout.body}}, "not a layout file"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			err := Untar(context.Background(), bytes.NewReader(tarOf(t, c.entries...)), dir, Options{})
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if _, err := os.Stat(filepath.Join(dir, "index.json")); err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrLayoutTar) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want ErrLayoutTar saying %q", err, c.want)
			}
		})
	}
}

func TestUntarLimits(t *testing.T) {
	big := blob(strings.Repeat("x", 4096))
	err := Untar(context.Background(), bytes.NewReader(tarOf(t, ociLayout, index, big)), t.TempDir(), Options{MaxBytes: 4000})
	if !errors.Is(err, ErrLayoutTar) || !strings.Contains(err.Error(), "larger than 4000 bytes") {
		t.Fatalf("over MaxBytes: %v", err)
	}
	err = Untar(context.Background(), bytes.NewReader(tarOf(t, ociLayout, index, big)), t.TempDir(), Options{MaxFiles: 2})
	if !errors.Is(err, ErrLayoutTar) || !strings.Contains(err.Error(), "more than 2 entries") {
		t.Fatalf("over MaxFiles: %v", err)
	}
	err = Untar(context.Background(), strings.NewReader("not a tar at all, just text that is long enough to be read as a header block"), t.TempDir(), Options{})
	if !errors.Is(err, ErrLayoutTar) {
		t.Fatalf("garbage: %v", err)
	}
}

func FuzzUntar(f *testing.F) {
	f.Add(tarOf(f, ociLayout, index, blob("x")))
	f.Add(tarOf(f, entry{name: "l/", typ: tar.TypeDir}, entry{name: "l/oci-layout", body: "{}"}, entry{name: "l/index.json", body: "{}"}))
	f.Add(tarOf(f, ociLayout, entry{name: "../x", body: "y"}))
	f.Add(tarOf(f, ociLayout, entry{name: "index.json", typ: tar.TypeSymlink}))
	f.Add([]byte("garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		err := Untar(context.Background(), bytes.NewReader(b), dir, Options{MaxBytes: 1 << 20, MaxFiles: 64})
		if err != nil && !errors.Is(err, ErrLayoutTar) {
			t.Fatalf("error outside ErrLayoutTar: %v", err)
		}
		// Nothing is ever written outside dir.
		_ = filepath.WalkDir(filepath.Dir(dir), func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !strings.HasPrefix(p, dir+string(filepath.Separator)) {
				t.Fatalf("file outside the layout: %s", p)
			}
			return nil
		})
	})
}

func TestUntarStream(t *testing.T) {
	small, big := blob("config"), blob(strings.Repeat("frame", 1000))
	var got []string
	dir := t.TempDir()
	err := Untar(context.Background(), bytes.NewReader(tarOf(t, ociLayout, index, small, big)), dir, Options{
		StreamMin: 1000,
		Stream: func(_ context.Context, digest string, size int64, r io.Reader) error {
			b, err := io.ReadAll(r)
			got = append(got, fmt.Sprintf("%s %d %d", digest, size, len(b)))
			return err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(strings.TrimPrefix(big.name, "blobs/"), "/", ":", 1) + " 5000 5000"
	if len(got) != 1 || got[0] != want {
		t.Fatalf("streamed %q, want [%s]", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(big.name))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the streamed blob is on disk too: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(small.name))); err != nil {
		t.Errorf("the small blob is not on disk: %v", err)
	}
	// A stream that stops early is a truncation, and its error is kept.
	err = Untar(context.Background(), bytes.NewReader(tarOf(t, ociLayout, index, big)), t.TempDir(), Options{
		StreamMin: 1000,
		Stream:    func(context.Context, string, int64, io.Reader) error { return nil },
	})
	if !errors.Is(err, ErrLayoutTar) || !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("unread stream: %v", err)
	}
	boom := errors.New("registry says no")
	err = Untar(context.Background(), bytes.NewReader(tarOf(t, ociLayout, index, big)), t.TempDir(), Options{
		StreamMin: 1000,
		Stream:    func(context.Context, string, int64, io.Reader) error { return boom },
	})
	if !errors.Is(err, boom) {
		t.Fatalf("stream error: %v", err)
	}
}
