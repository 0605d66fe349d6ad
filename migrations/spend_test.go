package migrations_test

import (
	"context"
	"testing"
	"time"
)

// TestSpendMigrated: migration 013 keeps a tenant's alert at or below its
// limit and amounts in range, gives listings no trial, allows trial_hour
// lines, and goes down and up again.
func TestSpendMigrated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, m := migratedTo(t, ctx, 12)
	var tenant, isv string
	if err := conn.QueryRow(ctx, `insert into accounts (name, role) values ('alice', 'tenant') returning id::text`).Scan(&tenant); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `insert into accounts (name, role) values ('acme', 'isv') returning id::text`).Scan(&isv); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `insert into listings (owner_id, name) values ($1::uuid, 'dnn')`, isv); err != nil {
		t.Fatal(err)
	}
	if err := m.MigrateTo(ctx, 13); err != nil {
		t.Fatal(err)
	}
	var trial int
	if err := conn.QueryRow(ctx, `select trial_hours from listings`).Scan(&trial); err != nil || trial != 0 {
		t.Fatalf("an existing listing's trial: %d, %v", trial, err)
	}
	for _, bad := range [][3]any{{"USD", 5, 4}, {"USD", -1, nil}, {"usd", nil, 1}, {"USD", nil, int64(1) << 60}} {
		if _, err := conn.Exec(ctx, `insert into spend_limits (tenant_id, currency, alert_micros, limit_micros) values ($1::uuid, $2, $3, $4)`,
			tenant, bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("spend limit %v stored", bad)
		}
	}
	if _, err := conn.Exec(ctx, `insert into spend_limits (tenant_id, currency, alert_micros, limit_micros) values ($1::uuid, 'USD', 3, 4)`,
		tenant); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `update listings set trial_hours = 10001`); err == nil {
		t.Error("a trial of 10001 hours stored")
	}
	if err := m.MigrateTo(ctx, 12); err != nil {
		t.Fatalf("down: %v", err)
	}
	if err := m.MigrateTo(ctx, 13); err != nil {
		t.Fatalf("up again: %v", err)
	}
}
