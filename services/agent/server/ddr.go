package server

// The operator's DDR diagnostics: GET and PUT /v1/slots/{n}/ddr.

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"unsafe"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/services/agent/slots"
)

// maxDDRIO bounds one diagnostic DDR access.
const maxDDRIO = 1 << 20

// readDDR (operator only) reads up to 1 MiB of a chip's DDR: the operator's
// check that a cleared slot holds nothing of its previous tenant.
func (s *Server) readDDR(w http.ResponseWriter, r *http.Request, p *principal) {
	sl, addr, n, ok := s.ddrParams(w, r, p)
	if !ok {
		return
	}
	buf := dmaBuffer(n)
	if err := sl.Chip.Read(r.Context(), addr, buf); err != nil {
		badRequest(w, "reading DDR: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"data": base64.StdEncoding.EncodeToString(buf)})
}

// dmaBuffer returns n bytes at a word-aligned address: the shell's DMA
// moves whole words from whole-word host addresses, and Go's allocator
// packs byte slices under 16 bytes at any offset.
func dmaBuffer(n int) []byte {
	w := make([]uint32, (n+3)/4)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}

// writeDDR (operator only) writes up to 1 MiB to a chip's DDR.
func (s *Server) writeDDR(w http.ResponseWriter, r *http.Request, p *principal) {
	sl, addr, _, ok := s.ddrParams(w, r, p)
	if !ok {
		return
	}
	var in struct {
		Data string `json:"data"`
	}
	if err := decode(r, &in); err != nil {
		badRequest(w, "%v", err)
		return
	}
	data, err := base64.StdEncoding.DecodeString(in.Data)
	if err != nil || len(data) > maxDDRIO {
		badRequest(w, "data: want base64 of at most %d bytes", maxDDRIO)
		return
	}
	buf := dmaBuffer(len(data))
	copy(buf, data)
	if err := sl.Chip.Write(r.Context(), addr, buf); err != nil {
		badRequest(w, "writing DDR: %v", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) ddrParams(w http.ResponseWriter, r *http.Request, p *principal) (slots.Slot, uint64, int, bool) {
	if !p.operator {
		writeWireError(w, http.StatusForbidden, agentapi.Error{Code: agentapi.CodePermission, Message: "DDR diagnostics are for the operator"})
		return slots.Slot{}, 0, 0, false
	}
	sl, ok := s.slotParam(w, r)
	if !ok {
		return sl, 0, 0, false
	}
	addr, err := strconv.ParseUint(r.URL.Query().Get("addr"), 0, 64)
	if err != nil {
		badRequest(w, "addr: want a card address")
		return sl, 0, 0, false
	}
	n := 0
	if r.Method == http.MethodGet {
		n, err = strconv.Atoi(r.URL.Query().Get("len"))
		if err != nil || n <= 0 || n > maxDDRIO {
			badRequest(w, "len: want 1 to %d", maxDDRIO)
			return sl, 0, 0, false
		}
	}
	return sl, addr, n, true
}
