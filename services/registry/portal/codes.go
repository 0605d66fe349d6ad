package portal

import (
	"net/http"

	"github.com/fpga-faas/faas/hdk/validate"
	"github.com/fpga-faas/faas/services/registry/validation"
)

// codeInfo explains a validation code on the codes page.
type codeInfo struct {
	Code, Severity, Meaning string
}

// codes are hdk's validation codes (hdk/validate/CODES.md) and the ones the
// registry's validation adds.
var codes = func() []codeInfo {
	var out []codeInfo
	for _, c := range validate.Codes() {
		out = append(out, codeInfo{string(c.Code), string(c.Severity), c.Description})
	}
	return append(out,
		codeInfo{string(validation.CodeSignature), "error", "The image has no signature valid for one of its ISV's registered, unrevoked signing keys: sign it with hdk sign and register the public key under Signing keys."},
		codeInfo{string(validation.CodeManifestMissing), "error", "The version's manifest is not in its repository: push the image again."},
		codeInfo{string(validation.CodeAttemptsExhausted), "error", "Validation failed for transient reasons too many times (storage or network); the operator is told. Attach the version again to retry."},
	)
}()

type codesPage struct{ Codes []codeInfo }

func (codesPage) title() string { return "Validation codes" }

func (p *Portal) codesPage(w http.ResponseWriter, r *http.Request) {
	p.render(w, r, http.StatusOK, pageCodes, codesPage{Codes: codes})
}
