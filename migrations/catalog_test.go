package migrations_test

import (
	"context"
	"testing"
	"time"
)

// TestCategoriesMigrated: migration 014 puts the free-text categories
// written before it on the fixed list, as the catalog counted them (the
// entry equal ignoring case and surrounding space, else other), and from
// then on the database refuses any other; down, the check goes and the
// categories stay as mapped.
func TestCategoriesMigrated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, m := migratedTo(t, ctx, 13)
	want := map[string]string{" ML ": "ml", "Video": "video", "crypto": "crypto", "": "other", "weird stuff": "other",
		"OTHER": "other", "hpc\t": "hpc", "vision": "vision", "\vvideo\r\n": "video", "machine learning": "other"}
	if _, err := conn.Exec(ctx, `insert into accounts (name, role) values ('acme', 'isv')`); err != nil {
		t.Fatal(err)
	}
	for before := range want {
		if _, err := conn.Exec(ctx, `insert into listings (owner_id, name, category) select id, $1, $2 from accounts`, "l"+before, before); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.MigrateTo(ctx, 14); err != nil {
		t.Fatal(err)
	}
	for before, after := range want {
		var got string
		if err := conn.QueryRow(ctx, `select category from listings where name = $1`, "l"+before).Scan(&got); err != nil || got != after {
			t.Errorf("category %q migrated to %q (%v), want %q", before, got, err, after)
		}
	}
	if _, err := conn.Exec(ctx, `update listings set category = 'Video'`); err == nil {
		t.Error("the database took a category off the list")
	}
	var def string
	if err := conn.QueryRow(ctx, `insert into listings (owner_id, name) select id, 'new' from accounts returning category`).Scan(&def); err != nil || def != "other" {
		t.Errorf("default category %q (%v), want other", def, err)
	}
	if _, err := conn.Exec(ctx, `insert into listing_logos (listing_id, png, digest, width, height)
		select id, '\x00', 'sha256:x', 1, 1 from listings where name = 'new'`); err == nil {
		t.Error("a logo with a malformed digest was stored")
	}
	if err := m.MigrateTo(ctx, 13); err != nil {
		t.Fatalf("down: %v", err)
	}
	if _, err := conn.Exec(ctx, `update listings set category = 'Video' where name = 'new'`); err != nil {
		t.Fatalf("after down, free text again: %v", err)
	}
}
