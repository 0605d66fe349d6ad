package testenv_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/fpga-faas/faas/internal/testenv"
)

func TestPostgres(t *testing.T) {
	t.Parallel()
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pg.URL)
	if err != nil {
		t.Fatalf("connect %s: %v", pg.URL, err)
	}
	defer conn.Close(ctx)
	var one int
	if err := conn.QueryRow(ctx, "select 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("select 1 = %d, %v", one, err)
	}
	var enc string
	if err := conn.QueryRow(ctx, "show server_encoding").Scan(&enc); err != nil || enc != "UTF8" {
		t.Errorf("server_encoding = %q, %v; want UTF8", enc, err)
	}
	for _, name := range []string{"fsync", "synchronous_commit", "full_page_writes"} {
		var v string
		if err := conn.QueryRow(ctx, "select current_setting($1)", name).Scan(&v); err != nil || v != "off" {
			t.Errorf("%s = %q, %v; want off", name, v, err)
		}
	}
	if _, err := os.Stat(filepath.Join(pg.SocketDir, ".s.PGSQL."+strconv.Itoa(pg.Port))); err != nil {
		t.Errorf("unix socket: %v", err)
	}
}

func TestMinIO(t *testing.T) {
	t.Parallel()
	s3 := testenv.MinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mc, err := minio.New(s3.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(s3.AccessKey, s3.SecretKey, ""),
		Region: s3.Region,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.MakeBucket(ctx, "blobs", minio.MakeBucketOptions{Region: s3.Region}); err != nil {
		t.Fatalf("make bucket: %v", err)
	}
	want := []byte("sealed bitstream bytes")
	if _, err := mc.PutObject(ctx, "blobs", "sha256/abc", bytes.NewReader(want), int64(len(want)),
		minio.PutObjectOptions{ContentType: "application/octet-stream"}); err != nil {
		t.Fatalf("put: %v", err)
	}
	obj, err := mc.GetObject(ctx, "blobs", "sha256/abc", minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	defer obj.Close()
	got, err := io.ReadAll(obj)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %q, %v; want %q", got, err, want)
	}
}

// TestMakefilePinsMinIO keeps `make tools` and the install hint of this
// package on the same MinIO version.
func TestMakefilePinsMinIO(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	version := testenv.MinIOModule[strings.Index(testenv.MinIOModule, "@")+1:]
	if !bytes.Contains(mk, []byte(version)) {
		t.Errorf("Makefile does not pin MinIO %s (testenv.MinIOModule)", version)
	}
}
