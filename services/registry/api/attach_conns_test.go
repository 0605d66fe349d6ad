package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/sdk/poolapi"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
)

// TestAttachOnOneConnection: placing an attachment holds the pool's
// advisory lock in its transaction, so it must need no second database
// connection. One that waited for a second while holding the lock
// deadlocked every replica once the other connections of the pool were
// in transactions queued on the lock (found by the chaos soak,
// internal/e2e TestSoak: heartbeats stalled for a minute, nodes lost).
// Here the rest of the pool is held, leaving the placement one connection.
func TestAttachOnOneConnection(t *testing.T) {
	p := newPool(t, api.AttachConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var held []*pgxpool.Conn
	defer func() {
		for _, c := range held {
			c.Release()
		}
	}()
	for range p.pool.Config().MaxConns - 1 {
		c, err := p.pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	body, _ := json.Marshal(poolapi.AttachRequest{Listing: p.listing.ID, Version: "1"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+registryapi.Prefix+"/attachments", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+p.users["tenant1"].token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("attach with one free database connection: %v (the placement waits for a second one while holding the lock)", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("attach with one free database connection: status %d", resp.StatusCode)
	}
}
