package keyrelease_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/services/registry/auth"
)

// FuzzRelease sends arbitrary bodies to the key release as a node account:
// never a 5xx, never a key, always a JSON error.
func FuzzRelease(f *testing.F) {
	srv, accounts := startHandler(f)
	acct, err := accounts.Create(f.Context(), "node1", auth.RoleNode, "pw")
	if err != nil {
		f.Fatal(err)
	}
	tok, err := accounts.IssueToken(f.Context(), acct.ID, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []string{``, `{}`, `[]`, `{"node_id": 1}`,
		`{"node_id": "00000000-0000-0000-0000-000000000000", "repository": "a/b", "digest": "sha256:` + string(bytes.Repeat([]byte("0"), 64)) + `", "grant": "fgr_x"}`,
		`{"node_id": "x' or 1=1 --", "repository": "a/b", "digest": "sha512:00", "grant": "fgr_", "tenant": "t"}`,
		`{"node_id": "n", "repository": "r", "digest": "d", "grant": "g", "extra": true}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+releasePath, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		var e struct {
			Error       struct{ Code string }
			WrappedKeys []registryapi.WrappedKey `json:"wrapped_keys"`
		}
		if res.StatusCode < 400 || res.StatusCode >= 500 || json.Unmarshal(b, &e) != nil || e.Error.Code == "" || len(e.WrappedKeys) > 0 {
			t.Fatalf("body %q: %d %s", body, res.StatusCode, b)
		}
	})
}
