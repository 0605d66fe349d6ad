package portal

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
)

// adminAudit is the operator's audit log: every call, of every account.
var adminAudit = auditView{tabs: adminTabs, tab: "audit", base: "/admin/audit",
	heading: "Audit log", intro: "Every state-changing call on the registry, newest first.", nav: "admin"}

// tab is an entry of a view's second-level navigation.
type tab struct {
	Href, Label string
	Current     bool
}

func tabsOf(cur string, entries ...[2]string) []tab {
	out := make([]tab, len(entries))
	for i, e := range entries {
		out[i] = tab{Href: e[0], Label: e[1], Current: strings.HasSuffix(e[0], "/"+cur)}
	}
	return out
}

func adminTabs(cur string) []tab {
	return tabsOf(cur, [2]string{"/admin/nodes", "Nodes"}, [2]string{"/admin/accounts", "Accounts"},
		[2]string{"/admin/validation", "Validation queue"}, [2]string{"/admin/invoices", "Invoices"},
		[2]string{"/admin/statements", "Revenue statements"}, [2]string{"/admin/audit", "Audit log"})
}

// Accounts ------------------------------------------------------------------------

// accountsPage is the accounts page; its refusal marks a field of the
// form creating an account, never of a row's.
type accountsPage struct {
	formRefusal
	Tabs     []tab
	Accounts []registryapi.Account
	Role     string // the filter
	Next     string
	Me       string
	Form     struct{ Name, Role string }
}

func (accountsPage) title() string { return "Accounts" }
func (accountsPage) nav() string   { return "admin" }

// RoleNames are the roles an account is created with; PersonRoles those
// an account can be changed between (the API keeps node accounts nodes).
func (accountsPage) RoleNames() []string   { return []string{"tenant", "isv", "admin", "node"} }
func (accountsPage) PersonRoles() []string { return []string{"tenant", "isv", "admin"} }

func (p *Portal) adminAccounts(w http.ResponseWriter, r *http.Request) {
	p.showAccounts(w, r, http.StatusOK, accountsPage{})
}

func (p *Portal) showAccounts(w http.ResponseWriter, r *http.Request, status int, pg accountsPage) {
	q := url.Values{"limit": {"100"}}
	in := r.URL.Query()
	if v := in.Get("role"); v != "" {
		q.Set("role", v)
		pg.Role = v
	}
	if v := in.Get("cursor"); v != "" {
		q.Set("cursor", v)
	}
	res, err := p.apiAs(accountOf(r)).Accounts(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg.Tabs, pg.Accounts, pg.Me = adminTabs("accounts"), res.Items, accountOf(r).ID
	if res.NextCursor != "" {
		q.Set("cursor", res.NextCursor)
		q.Del("limit")
		pg.Next = q.Encode()
	}
	p.render(w, r, status, pageAdminAccounts, pg)
}

// userError reports whether err is an API refusal to show on the form.
func userError(err error) (*registryclient.Error, bool) {
	ae, ok := apiRefusal(err)
	return ae, ok && ae.Status < 500 && ae.Status != http.StatusUnauthorized && ae.Status != http.StatusForbidden
}

func (p *Portal) adminCreateAccount(w http.ResponseWriter, r *http.Request) {
	req := registryapi.NewAccount{Name: strings.TrimSpace(r.PostFormValue("name")), Role: r.PostFormValue("role"),
		Password: r.PostFormValue("password")}
	_, err := p.apiAs(accountOf(r)).CreateAccount(r.Context(), req)
	if ae, ok := userError(err); ok {
		pg := accountsPage{formRefusal: refused(ae)}
		pg.Form.Name, pg.Form.Role = req.Name, req.Role
		p.showAccounts(w, r, ae.Status, pg)
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/admin/accounts", "account-created")
}

func (p *Portal) adminUpdateAccount(w http.ResponseWriter, r *http.Request) {
	var req registryapi.AccountUpdate
	if v := r.PostFormValue("role"); v != "" {
		req.Role = &v
	}
	switch v := r.PostFormValue("disabled"); v {
	case "true", "false":
		disabled := v == "true"
		req.Disabled = &disabled
	}
	_, err := p.apiAs(accountOf(r)).UpdateAccount(r.Context(), r.PathValue("id"), req)
	if ae, ok := userError(err); ok && ae.Status != http.StatusNotFound {
		p.showAccounts(w, r, ae.Status, accountsPage{formRefusal: formRefusal{Error: ae.Message}})
		return
	}
	if err != nil {
		p.fail(w, r, err)
		return
	}
	p.redirectFlash(w, r, "/admin/accounts", "account-updated")
}

// Nodes ---------------------------------------------------------------------------

type nodeView struct {
	registryapi.Node
	Boards []boardView
	// BoardsError says the last heartbeat's boards could not be read.
	BoardsError bool
	State       string // awaiting approval, approved, revoked
	Stale       bool
	Silent      string // how long since the last heartbeat
}

type nodesPage struct {
	Tabs       []tab
	Nodes      []nodeView
	StaleAfter string
	Next       string
}

func (nodesPage) title() string { return "Nodes" }
func (nodesPage) nav() string   { return "admin" }

type boardView struct {
	Model string
	Slots []slotView
}

type slotView struct {
	registryapi.Slot
	Short string // the digest's first 12 hex digits
}

// shortDigest is "sha256:" and the first 12 hex digits of d.
func shortDigest(d string) string {
	if i := strings.IndexByte(d, ':'); i >= 0 && len(d) > i+13 {
		return d[:i+13]
	}
	return d
}

// slotStates are the states a slot cell may show; anything else a node
// sent is shown as "unknown" rather than as a class of its choosing.
var slotStates = map[string]bool{"cleared": true, "loading": true, "loaded": true, "busy": true, "failed": true}

func (p *Portal) adminNodes(w http.ResponseWriter, r *http.Request) {
	q := url.Values{"limit": {"100"}}
	if v := r.URL.Query().Get("cursor"); v != "" {
		q.Set("cursor", v)
	}
	res, err := p.apiAs(accountOf(r)).Nodes(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := nodesPage{Tabs: adminTabs("nodes"), StaleAfter: fmt.Sprintf("%d seconds", int(staleAfter/time.Second))}
	now := time.Now()
	for _, n := range res.Items {
		v := nodeView{Node: n, State: "awaiting approval"}
		switch {
		case n.RevokedAt != nil:
			v.State = "revoked"
		case n.ApprovedAt != nil:
			v.State = "approved"
		}
		var boards []registryapi.Board
		if len(n.Boards) > 0 && json.Unmarshal(n.Boards, &boards) != nil {
			v.BoardsError, boards = true, nil
		}
		for _, b := range boards {
			bv := boardView{Model: b.Model}
			for _, s := range b.Slots {
				if !slotStates[s.State] {
					s.State = "unknown"
				}
				bv.Slots = append(bv.Slots, slotView{Slot: s, Short: shortDigest(s.Digest)})
			}
			v.Boards = append(v.Boards, bv)
		}
		if n.RevokedAt == nil {
			v.Stale = n.LastHeartbeatAt == nil || now.Sub(*n.LastHeartbeatAt) > staleAfter
		}
		if n.LastHeartbeatAt != nil {
			v.Silent = now.Sub(*n.LastHeartbeatAt).Round(time.Second).String()
		}
		pg.Nodes = append(pg.Nodes, v)
	}
	if res.NextCursor != "" {
		pg.Next = url.Values{"cursor": {res.NextCursor}}.Encode()
	}
	p.render(w, r, http.StatusOK, pageAdminNodes, pg)
}

func (p *Portal) adminNodeTrust(approve bool) http.HandlerFunc {
	flash := "node-approved"
	if !approve {
		flash = "node-revoked"
	}
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := p.apiAs(accountOf(r)).SetNodeTrust(r.Context(), r.PathValue("id"), approve); err != nil {
			p.fail(w, r, err)
			return
		}
		p.redirectFlash(w, r, "/admin/nodes", flash)
	}
}

// Validation queue -----------------------------------------------------------------

type reason struct {
	Code     string `json:"code"`
	Severity string `json:"severity"`
	Field    string `json:"field"`
	Message  string `json:"message"`
}

type jobView struct {
	registryapi.ValidationJob
	Findings []reason
}

type validationPage struct {
	Tabs   []tab
	State  string
	States []string
	Jobs   []jobView
	Next   string
}

func (validationPage) title() string { return "Validation queue" }
func (validationPage) nav() string   { return "admin" }

func (p *Portal) adminValidation(w http.ResponseWriter, r *http.Request) {
	in := r.URL.Query()
	q := url.Values{"limit": {"100"}}
	for _, k := range []string{"state", "cursor"} {
		if v := in.Get(k); v != "" {
			q.Set(k, v)
		}
	}
	res, err := p.apiAs(accountOf(r)).ValidationJobs(r.Context(), q)
	if err != nil {
		p.fail(w, r, err)
		return
	}
	pg := validationPage{Tabs: adminTabs("validation"), State: in.Get("state"),
		States: []string{"pending", "validating", "available", "failed"}}
	for _, j := range res.Items {
		v := jobView{ValidationJob: j}
		_ = json.Unmarshal(j.Reasons, &v.Findings) // unreadable reasons show as none; the raw JSON stays in the API
		pg.Jobs = append(pg.Jobs, v)
	}
	if res.NextCursor != "" {
		q.Set("cursor", res.NextCursor)
		q.Del("limit")
		pg.Next = q.Encode()
	}
	p.render(w, r, http.StatusOK, pageAdminValidation, pg)
}
