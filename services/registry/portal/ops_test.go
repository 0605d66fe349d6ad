package portal_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/registry/auth"
	"github.com/jackc/pgx/v5"
)

// TestOpsPagesRoles: signed out, every page sends to sign-in; signed in, a
// page answers its role and refuses (403) every other.
func TestOpsPagesRoles(t *testing.T) {
	r := newRig(t)
	for name, role := range map[string]auth.Role{"acme": auth.RoleISV, "alice": auth.RoleTenant, "root": auth.RoleAdmin} {
		r.user(name, role)
	}
	pages := map[string]string{ // path: the one account it is for
		"/my": "alice", "/admin": "root", "/admin/nodes": "root", "/admin/accounts": "root", "/admin/validation": "root",
		"/admin/audit": "root", "/isv/usage": "acme", "/isv/usage.csv": "acme", "/isv/audit": "acme",
	}
	anon := r.browser()
	for path := range pages {
		resp, page := anon.get(path)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/signin?next="+url.QueryEscape(path) || strings.Contains(page, "<table") {
			t.Errorf("signed out GET %s: %d to %q", path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	for _, who := range []string{"acme", "alice", "root"} {
		b := r.browser()
		b.signIn(who)
		for path, owner := range pages {
			resp, page := b.get(path)
			want := http.StatusForbidden
			if owner == who {
				want = http.StatusOK
				if path == "/admin" {
					want = http.StatusSeeOther
				}
			}
			if resp.StatusCode != want {
				t.Errorf("%s GET %s: %d, want %d", who, path, resp.StatusCode, want)
			}
			if want == http.StatusForbidden && !strings.Contains(page, "This page is for") {
				t.Errorf("%s GET %s: 403 without the reason", who, path)
			}
		}
	}
	// State changes of the operator's view are refused to others as well.
	for _, who := range []string{"acme", "alice"} {
		b := r.browser()
		_, page := b.get("/signin")
		b.signIn(who)
		_, page = b.get("/tokens")
		for _, path := range []string{"/admin/accounts", "/admin/accounts/00000000-0000-0000-0000-000000000000",
			"/admin/nodes/00000000-0000-0000-0000-000000000000/approve"} {
			if resp, _ := b.do(http.MethodPost, path, url.Values{"csrf": {csrf(t, page)}, "name": {"evil"}, "role": {"admin"}}, nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s POST %s: %d, want 403", who, path, resp.StatusCode)
			}
		}
	}
	accts, err := r.as("root").Accounts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range accts.Items {
		if a.Name == "evil" {
			t.Fatal("a non-admin created an account")
		}
	}
}

func TestMyAccelerators(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	alice := r.browser()
	alice.signIn("alice")
	resp, page := alice.get("/my")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/my: %d", resp.StatusCode)
	}
	// Subscription, both slots of n1 running alice's image, and the cost:
	// 2 busy hours at USD 1.50.
	if m := has(page, "<title>My accelerators", `href="/listings/`+f.aes+`">Fast AES`, "<td>n1</td>", `slotstate busy">busy`,
		`slotstate loaded">loaded`, "2.00", "USD 3.00", "Unsubscribe…"); len(m) > 0 {
		t.Fatalf("/my lacks %q:\n%s", m, page)
	}
	if strings.Contains(page, "Matrix") || strings.Contains(page, "failed") {
		t.Fatalf("/my shows bob's listing or a slot not alice's:\n%s", page)
	}
	bob := r.browser()
	bob.signIn("bob")
	if _, page := bob.get("/my"); strings.Contains(page, "Fast AES") || !strings.Contains(page, "Nothing of yours is loaded") {
		t.Fatalf("bob's /my:\n%s", page)
	}

	// Ending a subscription asks first, then revokes the entitlement.
	_, page = alice.get("/my")
	m := regexp.MustCompile(`href="/my/subscriptions/([0-9a-f-]+)/end"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no unsubscribe link")
	}
	end := "/my/subscriptions/" + m[1] + "/end"
	// Not bob's to end, by either method.
	if resp, _ := bob.get(end); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob GET %s: %d", end, resp.StatusCode)
	}
	_, bobPage := bob.get("/my")
	if resp, _ := bob.do(http.MethodPost, end, url.Values{"csrf": {csrf(t, bobPage)}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("bob POST %s: %d", end, resp.StatusCode)
	}
	resp, page = alice.get(end)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, "End your subscription to Fast AES?") || !strings.Contains(page, "new loads") {
		t.Fatalf("confirmation: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = alice.do(http.MethodPost, end, url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/my" {
		t.Fatalf("unsubscribe: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	_, page = alice.get("/my")
	if !strings.Contains(page, "Subscription ended.") || !strings.Contains(page, "You have no subscriptions") {
		t.Fatalf("/my after unsubscribing:\n%s", page)
	}
	ents, err := r.as("alice").Entitlements(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents.Items) != 1 || ents.Items[0].RevokedAt == nil {
		t.Fatalf("alice's entitlements: %+v", ents.Items)
	}
}

func TestAdminAccounts(t *testing.T) {
	r := newRig(t)
	r.user("root", auth.RoleAdmin)
	r.user("alice", auth.RoleTenant)
	b := r.browser()
	b.signIn("root")
	_, page := b.get("/admin/accounts")
	tok := csrf(t, page)
	resp, _ := b.do(http.MethodPost, "/admin/accounts", url.Values{"csrf": {tok}, "name": {"carol"}, "role": {"isv"}, "password": {password}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("create: %d", resp.StatusCode)
	}
	_, page = b.get("/admin/accounts")
	if m := has(page, "Account created.", "<td>carol</td>", `role-badge isv">isv`); len(m) > 0 {
		t.Fatalf("accounts page lacks %q", m)
	}
	// A bad name comes back on the form with the API's reason, on the field.
	resp, page = b.do(http.MethodPost, "/admin/accounts", url.Values{"csrf": {tok}, "name": {"Bad Name"}, "role": {"tenant"}}, nil)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(errorOf(page), "Name: want lower-case") || !strings.Contains(page, `value="Bad Name"`) {
		t.Fatalf("bad name: %d\n%s", resp.StatusCode, page)
	}
	flagged(t, "bad name", page, "acct-name", "want lower-case")

	accts, err := r.as("root").Accounts(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, a := range accts.Items {
		ids[a.Name] = a.ID
	}
	if resp, _ := b.do(http.MethodPost, "/admin/accounts/"+ids["alice"], url.Values{"csrf": {tok}, "disabled": {"true"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable: %d", resp.StatusCode)
	}
	// alice's session ends with her account.
	if resp, _ := r.browser().get("/my"); resp.StatusCode != http.StatusSeeOther {
		t.Fatal("signed out /my")
	}
	if resp, _ := b.do(http.MethodPost, "/admin/accounts/"+ids["carol"], url.Values{"csrf": {tok}, "role": {"tenant"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("role change: %d", resp.StatusCode)
	}
	if accts, err = r.as("root").Accounts(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	for _, a := range accts.Items {
		if (a.Name == "alice" && !a.Disabled) || (a.Name == "carol" && a.Role != "tenant") {
			t.Errorf("after the changes: %+v", a)
		}
	}
	_, page = b.get("/admin/accounts")
	if !strings.Contains(page, "Account changed.") || !strings.Contains(page, ">Enable</button>") {
		t.Fatal("accounts page after the changes")
	}
	// No form offers to change oneself; a forged post is refused by the API.
	if strings.Contains(page, `action="/admin/accounts/`+ids["root"]+`"`) {
		t.Error("a form to change one's own account")
	}
	resp, page = b.do(http.MethodPost, "/admin/accounts/"+ids["root"], url.Values{"csrf": {tok}, "disabled": {"true"}}, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(page, "your own account") {
		t.Fatalf("disabling oneself: %d\n%s", resp.StatusCode, page)
	}
	// Audited, and the audit page filters by action and account.
	_, page = b.get("/admin/audit?action=account.update&actor=root")
	if strings.Count(page, "<code>account.update</code>") != 2 || strings.Contains(page, "<code>account.create</code>") {
		t.Fatalf("audit filtered to account.update:\n%s", page)
	}
	_, page = b.get("/admin/audit?actor=nobody")
	if !strings.Contains(page, "No entries match these filters") {
		t.Fatal("audit filtered to an unknown account")
	}
}

func TestAdminNodesAndQueue(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	_, pending := r.node("n3")
	r.api("root", http.MethodPost, "/nodes/"+pending+"/revoke", nil, nil) // n3: revoked
	b := r.browser()
	b.signIn("root")
	_, page := b.get("/admin/nodes")
	n1 := page[strings.Index(page, `id="node-`+f.n1+`"`):]
	n1 = n1[:strings.Index(n1, "</section>")]
	for _, s := range []string{"busy", "loaded", "cleared", "failed"} {
		if !strings.Contains(n1, `class="slot `+s+`"`) {
			t.Errorf("n1's grid lacks a %s slot", s)
		}
	}
	if strings.Contains(n1, ">stale<") || !strings.Contains(n1, "faas-vu9p-2") || !strings.Contains(n1, "DMA timeout") {
		t.Errorf("n1 (fresh heartbeat):\n%s", n1)
	}
	n2 := page[strings.Index(page, `id="node-`+f.n2+`"`):]
	n2 = n2[:strings.Index(n2, "</section>")]
	if !strings.Contains(n2, ">stale<") || !strings.Contains(n2, "no heartbeat yet") {
		t.Errorf("n2 (never heard from) not flagged stale:\n%s", n2)
	}
	// n1's heartbeat ages past 3 periods.
	if _, err := r.srv.Pool().Exec(t.Context(), `update nodes set last_heartbeat_at = now() - interval '91 seconds' where id = $1`, f.n1); err != nil {
		t.Fatal(err)
	}
	_, page = b.get("/admin/nodes")
	n1 = page[strings.Index(page, `id="node-`+f.n1+`"`):]
	if n1 = n1[:strings.Index(n1, "</section>")]; !strings.Contains(n1, ">stale<") {
		t.Errorf("n1 silent 91 s not stale")
	}

	// A node registered without a token waits for approval.
	acct, waiting := r.node("n4")
	_ = acct
	r.srv.Pool().Exec(t.Context(), `update nodes set approved_at = null where id = $1`, waiting)
	_, page = b.get("/admin/nodes")
	if !strings.Contains(page, `action="/admin/nodes/`+waiting+`/approve"`) || strings.Contains(page, `action="/admin/nodes/`+pending+`/revoke"`) {
		t.Fatal("approve button for the waiting node, none for the revoked one")
	}
	resp, _ := b.do(http.MethodPost, "/admin/nodes/"+waiting+"/approve", url.Values{"csrf": {csrf(t, page)}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("approve: %d", resp.StatusCode)
	}
	if _, page = b.get("/admin/nodes"); !strings.Contains(page, "Node approved") {
		t.Fatal("no notice after approving")
	}

	// The validation queue shows both versions, with findings of a failed one.
	if _, err := r.srv.Pool().Exec(t.Context(), `update validation_jobs set state = 'failed', attempts = 1,
		reasons = '[{"code":"ISV_SIGNATURE_INVALID","severity":"error","chip":-1,"message":"no signature by a key of acme"}]'
		where manifest_digest = $1`, f.aesDigest); err != nil {
		t.Fatal(err)
	}
	_, page = b.get("/admin/validation")
	if m := has(page, "acme/fast-aes", "globex/matrix", `state failed">failed`, "ISV_SIGNATURE_INVALID", "no signature by a key of acme", "1 / 5"); len(m) > 0 {
		t.Fatalf("validation queue lacks %q:\n%s", m, page)
	}
	// The registry's worker validates meanwhile (and fails globex's
	// unsigned version, sooner or later): a job that is not failed after
	// the page was served was not failed while it was.
	_, page = b.get("/admin/validation?state=failed")
	if !strings.Contains(page, "acme/fast-aes") {
		t.Fatal("state filter: the failed job is missing")
	}
	rows, err := r.srv.Pool().Query(t.Context(), `select r.name from validation_jobs j join repositories r on r.id = j.repository_id
		where j.state <> 'failed'`)
	if err != nil {
		t.Fatal(err)
	}
	others, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	for _, repo := range others {
		if strings.Contains(page, repo) {
			t.Errorf("state filter: %s, not failed, is listed", repo)
		}
	}
}

func TestISVUsage(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	// acme holds an entitlement of its own to globex's listing: the API
	// lists it to acme, but acme is no subscriber of its own listings.
	r.api("globex", http.MethodPost, "/listings/"+f.matrix+"/shares", map[string]string{"account": "acme"}, nil)
	acme := r.browser()
	acme.signIn("acme")
	resp, page := acme.get("/isv/usage")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/isv/usage: %d", resp.StatusCode)
	}
	// alice subscribed; two loads, 2 busy hours at USD 1.50.
	if m := has(page, "<td>alice</td>", "USD 3.00", "2.00", `<svg id="revenue-USD"`, `<rect class="bar"`, "Export CSV", `href="/isv/usage.csv?from=`); len(m) > 0 {
		t.Fatalf("acme's usage page lacks %q:\n%s", m, page)
	}
	// A bar for today carries the revenue, with a height above zero.
	bar := regexp.MustCompile(`<rect class="bar" x="[0-9.]+" y="[0-9.]+" width="[0-9.]+" height="([0-9.]+)"><title>[0-9-]+: USD 3.00, 2 loads</title>`).FindStringSubmatch(page)
	if bar == nil || bar[1] == "0.0" {
		t.Fatalf("no bar of today's revenue:\n%s", page)
	}
	if strings.Contains(page, "bob") || strings.Contains(page, "Matrix") {
		t.Fatal("acme sees globex's subscriber or listing")
	}
	// globex sees none of acme's, even naming acme's listing.
	globex := r.browser()
	globex.signIn("globex")
	for _, path := range []string{"/isv/usage", "/isv/usage?listing=" + f.aes} {
		_, page := globex.get(path)
		if strings.Contains(page, "alice") || strings.Contains(page, "Fast AES") || strings.Contains(page, "USD 3.00") {
			t.Errorf("globex GET %s shows acme's data:\n%s", path, page)
		}
	}
	resp, body := globex.get("/isv/usage.csv?listing=" + f.aes)
	if rows, _ := csv.NewReader(strings.NewReader(body)).ReadAll(); resp.StatusCode != http.StatusOK || len(rows) != 1 {
		t.Errorf("globex's export of acme's listing: %d %q", resp.StatusCode, body)
	}
	// Bad dates are named.
	resp, page = acme.get("/isv/usage?from=yesterday")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, "from: want a date like") {
		t.Fatalf("bad from: %d", resp.StatusCode)
	}
	if resp, _ := acme.get("/isv/usage?from=2020-01-01&to=2030-01-01"); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("ten years: %d", resp.StatusCode)
	}
}

// TestUsageCSV: the export is an attachment and no cell starts a formula.
func TestUsageCSV(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	evil := "=HYPERLINK(\"http://evil.example\",\"x\")"
	r.api("acme", http.MethodPatch, "/listings/"+f.aes, map[string]string{"name": evil}, nil)
	acme := r.browser()
	acme.signIn("acme")
	resp, body := acme.get("/isv/usage.csv")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") ||
		!strings.HasPrefix(resp.Header.Get("Content-Disposition"), `attachment; filename="usage-`) {
		t.Fatalf("export: %d %v", resp.StatusCode, resp.Header)
	}
	rows, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil || len(rows) != 2 {
		t.Fatalf("export rows %q: %v", body, err)
	}
	if rows[0][0] != "day" || rows[1][2] != "'"+evil || rows[1][3] != "alice" || rows[1][4] != "2" || rows[1][6] != "2.0000" || rows[1][10] != "3.000000" {
		t.Fatalf("export %q", rows)
	}
	for _, row := range rows {
		for _, cell := range row {
			if cell != "" && strings.ContainsRune("=+-@", rune(cell[0])) {
				t.Errorf("cell %q starts a formula", cell)
			}
		}
	}
}

func TestISVAudit(t *testing.T) {
	r := newRig(t)
	f := newFleet(r)
	acme := r.browser()
	acme.signIn("acme")
	_, page := acme.get("/isv/audit")
	if m := has(page, "<code>listing.create</code>", "<code>entitlement.subscribe</code>", f.aes); len(m) > 0 {
		t.Fatalf("acme's audit lacks %q:\n%s", m, page)
	}
	if strings.Contains(page, f.matrix) || strings.Contains(page, ">globex<") || strings.Contains(page, ">bob<") {
		t.Fatalf("acme sees globex's entries:\n%s", page)
	}
	_, page = acme.get("/isv/audit?action=entitlement.subscribe")
	if strings.Contains(page, "<code>listing.create</code>") || !strings.Contains(page, "<code>entitlement.subscribe</code>") {
		t.Fatal("action filter")
	}
	// Naming globex's listing shows nothing.
	_, page = acme.get("/isv/audit?target_id=" + f.matrix)
	if !strings.Contains(page, "No entries match") {
		t.Fatalf("acme filtering on globex's listing:\n%s", page)
	}
}
