package migrations_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/tern/v2/migrate"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/migrations"
)

// TestTagsHealed brings a database to migration 009 with a listed
// version's tag moved to another image, as a push could before versions
// were immutable, and checks that 010 puts the tag back on the version's
// image and leaves a tag whose version's image is gone alone.
func TestTagsHealed(t *testing.T) {
	pg := testenv.Postgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin := connect(t, ctx, pg.URL)
	if _, err := admin.Exec(ctx, "create database heal"); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, ctx, pg.DatabaseURL("heal"))
	m, err := migrate.NewMigrator(ctx, conn, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.LoadMigrations(migrations.FS()); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	digest := func(c byte) string {
		b := make([]byte, 64)
		for i := range b {
			b[i] = c
		}
		return "sha256:" + string(b)
	}
	old, moved, gone := digest('a'), digest('b'), digest('c')
	for _, q := range []string{
		`insert into accounts (name, role) values ('acme', 'isv')`,
		`insert into repositories (name) values ('acme/fft')`,
		`insert into manifests (repository_id, digest, media_type, size, content)
			select r.id, d, 'application/vnd.oci.image.manifest.v1+json', 2, '{}' from repositories r, unnest(array['` + old + `', '` + moved + `']) d`,
		`insert into listings (owner_id, repository_id, name) select a.id, r.id, 'Edge FFT' from accounts a, repositories r`,
		`insert into listing_versions (listing_id, version, manifest_digest) select id, '0.9.0', '` + old + `' from listings`,
		`insert into listing_versions (listing_id, version, manifest_digest) select id, '0.8.0', '` + gone + `' from listings`,
		`insert into tags (repository_id, name, manifest_digest) select id, '0.9.0', '` + moved + `' from repositories`,
		`insert into tags (repository_id, name, manifest_digest) select id, '0.8.0', '` + moved + `' from repositories`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := migrations.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for tag, want := range map[string]string{"0.9.0": old, "0.8.0": moved} {
		var got string
		if err := conn.QueryRow(ctx, `select manifest_digest from tags where name = $1`, tag).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("tag %s names %s after 010, want %s", tag, got, want)
		}
	}
}
