package registryapi

// ErrorBody is the envelope of every error answer of the API.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo says what went wrong, for programs (Code) and for people
// (Message, written to be shown as it is).
type ErrorInfo struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Field names the request field that was refused, for CodeInvalid.
	Field string `json:"field,omitempty"`
}

// Error codes. A client decides on the status first and the code second:
// a code names the kind of refusal within its status.
const (
	CodeInvalid          = "invalid"            // 400, 422 with Field
	CodeTooLarge         = "too_large"          // 413
	CodeUnsupportedType  = "unsupported_type"   // 415
	CodeUnauthenticated  = "unauthenticated"    // 401
	CodeSpendLimit       = "spend_limit"        // 402: the tenant's spend limit is reached (SpendLimit)
	CodeForbidden        = "forbidden"          // 403
	CodeNodeUntrusted    = "node_untrusted"     // 403: the node is not approved, or revoked
	CodeGrantInvalid     = "grant_invalid"      // 403: the load grant is unknown, spent, expired or not for this load
	CodeNotFound         = "not_found"          // 404
	CodeMethodNotAllowed = "method_not_allowed" // 405
	CodeConflict         = "conflict"           // 409
	CodeAttachmentEnded  = "attachment_ended"   // 410
	CodeRateLimited      = "rate_limited"       // 429, with Retry-After
	CodeUnavailable      = "unavailable"        // 503, with Retry-After
	CodeInternal         = "internal"           // 500
)
