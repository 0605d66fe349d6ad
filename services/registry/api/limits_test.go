package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/api"
	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/meta"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestPasswordLockout: /api/v1 with Basic answers 429 and Retry-After once
// an account failed too often, to the right password too, until the lockout
// has passed; API tokens keep working.
func TestPasswordLockout(t *testing.T) {
	ctx := context.Background()
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	pool := testenv.RegistryDB(t)
	as, err := auth.NewStore(pool, auth.WithParams(testParams), auth.WithLimits(auth.Limits{Now: clk.Now}))
	if err != nil {
		t.Fatal(err)
	}
	a, err := api.New(api.Config{DB: pool, Accounts: as, Meta: meta.New(pool)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	acct, err := as.Create(ctx, "tenant1", auth.RoleTenant, "right")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := as.IssueToken(ctx, acct.ID, "ci")
	if err != nil {
		t.Fatal(err)
	}
	get := func(user, pass, bearer string) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+registryapi.Prefix+"/me", nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		} else {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Error struct{ Code string } `json:"error"`
		}
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), body.Error.Code
	}
	free := auth.DefaultAccountBackoff.Free
	for i := 1; i <= 30; i++ {
		code, retry, ecode := get("tenant1", fmt.Sprintf("guess-%d", i), "")
		switch {
		case i <= free+1 && code != http.StatusUnauthorized:
			t.Fatalf("guess %d: %d, want 401", i, code)
		case i > free+1 && (code != http.StatusTooManyRequests || retry != "1" || ecode != "rate_limited"):
			t.Fatalf("guess %d: %d %s Retry-After %q, want 429 rate_limited Retry-After 1", i, code, ecode, retry)
		}
	}
	if code, _, _ := get("tenant1", "right", ""); code != http.StatusTooManyRequests {
		t.Fatalf("right password while locked: %d", code)
	}
	if code, _, _ := get("", "", tok); code != http.StatusOK {
		t.Fatalf("API token while the password is locked: %d", code)
	}
	if code, _, _ := get("tenant1", tok, ""); code != http.StatusOK {
		t.Fatalf("API token as Basic password while the password is locked: %d", code)
	}
	clk.Advance(time.Second)
	if code, _, _ := get("tenant1", "right", ""); code != http.StatusOK {
		t.Fatalf("right password after the lockout: %d", code)
	}
}
