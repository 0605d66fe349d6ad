package faas

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAttachSpendLimit: a registry that refuses the attachment at the
// tenant's spend limit (402 spend_limit) makes Attach fail at once with
// ErrSpendLimit, the registry's words and what to do about it.
func TestAttachSpendLimit(t *testing.T) {
	posts := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusPaymentRequired)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "spend_limit",
			"message": "alice has spent 4.000000 USD of its spend limit of 4.000000 USD for 2026-11"}})
	}))
	t.Cleanup(srv.Close)
	_, err := Attach(context.Background(), srv.URL, "acme/mnist", WithRegistryToken("tok"), WithLocalAgent("-"), WithAttachAttempts(3))
	if !errors.Is(err, ErrSpendLimit) || errors.Is(err, ErrNoCapacity) || !strings.Contains(err.Error(), "spend limit of 4.000000 USD") ||
		!strings.Contains(Hint(err), "raise your spend limit") || posts != 1 {
		t.Fatalf("attach at the spend limit: %v (hint %q), %d requests", err, Hint(err), posts)
	}
}
