package server

// The agent's route table: one place that lists every endpoint, whom it
// serves (authed: a credential or a known uid; the rest: anyone) and its
// handler.

import (
	"io"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// route is one endpoint of the API: a ServeMux pattern and its handler.
type route struct {
	pattern string
	h       http.HandlerFunc
}

// routeTable is the API. Every endpoint but /healthz and /v1/node goes
// through authed.
func (s *Server) routeTable() []route {
	return []route{
		{"GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }},
		// Which node this is, for anyone: a client of the pool asks before it
		// sends an attachment's credential, which only its node may see.
		{"GET /v1/node", func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, agentapi.NodeInfo{NodeID: s.cfg.NodeID})
		}},
		{"GET /v1/slots", s.authed(s.listSlots)},
		{"GET /v1/slots/{n}", s.authed(s.getSlot)},
		{"POST /v1/slots/{n}/clear", s.authed(s.clearSlot)},
		{"POST /v1/slots/{n}/session", s.authed(s.openSession)},
		{"GET /v1/slots/{n}/ddr", s.authed(s.readDDR)},
		{"PUT /v1/slots/{n}/ddr", s.authed(s.writeDDR)},
		{"POST /v1/loads", s.authed(s.startLoad(false))},
		{"POST /v1/pulls", s.authed(s.startLoad(true))},
		{"GET /v1/loads/{id}", s.authed(s.getLoad)},
		{"GET /v1/loads/{id}/events", s.authed(s.loadEvents)},
		{"GET /v1/images", s.authed(s.listImages)},
		{"GET /metrics", s.authed(func(w http.ResponseWriter, r *http.Request, p *principal) {
			if !p.operator {
				writeWireError(w, http.StatusForbidden, agentapi.Error{Code: agentapi.CodePermission, Message: "metrics are for the operator"})
				return
			}
			promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{}).ServeHTTP(w, r)
		})},
	}
}

// Patterns returns the API's route patterns ("METHOD /path/{param}"), so
// that tests can prove every endpoint is covered.
func (s *Server) Patterns() []string {
	var out []string
	for _, r := range s.routeTable() {
		out = append(out, r.pattern)
	}
	return out
}

func (s *Server) routes() {
	m := http.NewServeMux()
	for _, r := range s.routeTable() {
		m.HandleFunc(r.pattern, r.h)
	}
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeWireError(w, http.StatusNotFound, agentapi.Error{Code: agentapi.CodeNotFound, Message: "no such endpoint: " + r.Method + " " + r.URL.Path})
	})
	s.mux = m
}
