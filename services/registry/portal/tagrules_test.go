package portal_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
)

var ruleDeleteRE = regexp.MustCompile(`action="(/isv/listings/[^"]+/tag-rules/[^"]+/delete)"`)

// TestTagRulesForm adds a tag rule on the listing editor, sees a malformed
// pattern refused on the form, and removes the rule.
func TestTagRulesForm(t *testing.T) {
	r := newRig(t)
	r.user("acme", auth.RoleISV)
	listing := r.listing("acme", "Edge FFT", "an FFT", false)
	b := r.browser()
	b.signIn("acme")
	edit := "/isv/listings/" + listing
	_, page := b.get(edit)
	token := csrf(t, page)
	if !strings.Contains(page, "No rule.") {
		t.Fatalf("a new listing's editor shows rules: %s", page)
	}
	resp, page := b.do(http.MethodPost, edit+"/tag-rules", url.Values{"csrf": {token}, "pattern": {"v[0-9"}}, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(errorOf(page), "malformed") {
		t.Errorf("malformed pattern: %d %s, want 422 saying malformed", resp.StatusCode, errorOf(page))
	}
	if resp, page := b.do(http.MethodPost, edit+"/tag-rules", url.Values{"csrf": {token}, "pattern": {"release-*"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("add rule: %d %s", resp.StatusCode, errorOf(page))
	}
	_, page = b.get(edit)
	m := ruleDeleteRE.FindStringSubmatch(page)
	if !strings.Contains(page, "<code>release-*</code>") || m == nil {
		t.Fatalf("the editor does not list the rule with its remove form:\n%s", page)
	}
	if resp, page := b.do(http.MethodPost, m[1], url.Values{"csrf": {token}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("remove rule: %d %s", resp.StatusCode, errorOf(page))
	}
	if _, page = b.get(edit); !strings.Contains(page, "No rule.") {
		t.Errorf("the rule is still listed after its removal")
	}
}
