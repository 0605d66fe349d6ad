package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/fpga-faas/faas/services/registry/server"
)

// TestLoginMemoryBudget: 40 concurrent wrong passwords at each endpoint
// that checks passwords (the token endpoint, /api/v1, the key release,
// which used to escape the login limit) never run more argon2id hashes at
// once than the memory budget allows, and are answered 401 (or 503 when
// they waited too long), never 500.
func TestLoginMemoryBudget(t *testing.T) {
	cost := 2 * int64(testParams.Memory) << 10 // a hash is charged twice its argon2id memory
	var mu sync.Mutex
	maxRunning, hashes := 0, 0
	r := start(t, server.Config{PasswordLimits: auth.Limits{
		HashMemory: 2 * cost,
		Source:     auth.Backoff{Free: 1000}, // one test address: the budget alone is under test
		OnHash: func(running int, memory int64) {
			mu.Lock()
			maxRunning, hashes = max(maxRunning, running), hashes+1
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // let the others pile up
		},
	}})
	endpoints := []struct{ method, path, body string }{
		{http.MethodGet, "/auth/token?service=" + server.DefaultService + "&scope=repository:isv1/app:pull", ""},
		{http.MethodGet, "/api/v1/me", ""},
		{http.MethodPost, "/api/v1/keys/release", `{}`},
	}
	for _, ep := range endpoints {
		mu.Lock()
		maxRunning, hashes = 0, 0
		mu.Unlock()
		codes := make(chan int, 40)
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Go(func() {
				req, _ := http.NewRequest(ep.method, r.url+ep.path, strings.NewReader(ep.body))
				req.SetBasicAuth(fmt.Sprintf("user%d", i), "wrong")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				codes <- resp.StatusCode
			})
		}
		wg.Wait()
		close(codes)
		for c := range codes {
			if c != http.StatusUnauthorized && c != http.StatusServiceUnavailable {
				t.Errorf("%s %s: status %d", ep.method, ep.path, c)
			}
		}
		mu.Lock()
		if maxRunning > 2 || hashes != 40 {
			t.Errorf("%s %s: %d hashes, at most %d at once; the budget holds 2", ep.method, ep.path, hashes, maxRunning)
		}
		mu.Unlock()
	}
}
