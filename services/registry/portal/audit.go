package portal

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// auditView configures one audit page: the operator's (everything) or an
// ISV's (what the API shows it: its listings, its keys, its own actions).
type auditView struct {
	tabs                    func(string) []tab
	tab, base, heading, nav string
	intro                   string
}

type auditRow struct {
	registryapi.AuditEntry
	Details string
}

type auditPage struct {
	Tabs                                []tab
	Heading, Intro, Base                string
	Action, TargetType, TargetID, Actor string
	Entries                             []auditRow
	Next                                string
	Filtered                            bool
	navName                             string
}

func (a auditPage) title() string { return a.Heading }
func (a auditPage) nav() string   { return a.navName }

// maxDetails bounds the details shown in a row; the API has them whole.
const maxDetails = 240

func (p *Portal) audit(v auditView) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		in := r.URL.Query()
		pg := auditPage{Tabs: v.tabs(v.tab), Heading: v.heading, Intro: v.intro, Base: v.base, navName: v.nav,
			Action: strings.TrimSpace(in.Get("action")), TargetType: strings.TrimSpace(in.Get("target_type")),
			TargetID: strings.TrimSpace(in.Get("target_id")), Actor: strings.TrimSpace(in.Get("actor"))}
		q := url.Values{"limit": {"50"}}
		for k, val := range map[string]string{"action": pg.Action, "target_type": pg.TargetType, "target_id": pg.TargetID,
			"actor": pg.Actor, "cursor": in.Get("cursor")} {
			if val != "" {
				q.Set(k, val)
				pg.Filtered = pg.Filtered || k != "cursor"
			}
		}
		res, err := p.apiAs(accountOf(r)).Audit(r.Context(), q)
		if err != nil {
			p.fail(w, r, err)
			return
		}
		for _, e := range res.Items {
			d := string(e.Details)
			if d == "{}" || d == "null" {
				d = ""
			}
			if len(d) > maxDetails {
				d = strings.ToValidUTF8(d[:maxDetails], "") + "…"
			}
			pg.Entries = append(pg.Entries, auditRow{AuditEntry: e, Details: d})
		}
		if res.NextCursor != "" {
			q.Set("cursor", res.NextCursor)
			q.Del("limit")
			pg.Next = q.Encode()
		}
		p.render(w, r, http.StatusOK, pageAudit, pg)
	}
}
