// Package agentapi is the wire contract of the node agent's API: the JSON
// documents faasd serves over HTTP on its unix socket (DefaultSocket) or, for
// remote attach, on TCP with TLS. The SDK's client (package sdk/faas) and
// faasd both build on these types, so the contract is written once.
//
// # Endpoints
//
//	GET  /v1/slots               {"slots": [Slot]}          every slot of the host
//	GET  /v1/slots/{n}           Slot                        one slot, with sensors
//	POST /v1/slots/{n}/clear     Slot                        clear a slot you hold (or any, as operator)
//	POST /v1/loads               LoadRequest → 202 Load      start loading an image
//	GET  /v1/loads/{id}          Load                        a load's state and phase timings
//	GET  /v1/loads/{id}/events   NDJSON stream of Event      progress from the start, ends with the final Load
//	POST /v1/pulls               PullRequest → 202 Load      prefetch an image into the cache (Kind "pull")
//	GET  /v1/images              {"images": [CachedBlob]}    the node cache: your own pulls (all, as operator)
//	POST /v1/slots/{n}/session   101 → session frames       a tenant session on an AliDNN slot (sdk/agentapi/session)
//	GET  /healthz                "ok"                        liveness, no authentication
//	GET  /metrics                Prometheus text             operator only
//
// # Authentication
//
// On the unix socket the agent reads the caller's uid from the socket's peer
// credentials and maps it to a tenant by its configuration; uid 0 and the
// agent's own uid are the operator. A request may instead (and on TCP must)
// carry "Authorization: Bearer faas_…", a registry API token of a tenant
// account, which the agent checks with the registry. Loads and pulls always
// need that token: the agent pulls with it, so the registry decides what the
// tenant is entitled to.
//
// # Errors
//
// Any status >= 400 carries {"error": Error}; Error.Code is one of the Code
// constants, stable for scripts.
package agentapi

import "time"

// DefaultSocket is where faasd listens unless configured otherwise.
const DefaultSocket = "/run/faas/faasd.sock"

// SlotState is the state of a slot, after AWS's fpga-describe-local-image.
type SlotState string

// Slot states.
const (
	Cleared SlotState = "cleared" // blank role, DDR zeroed: ready for any tenant
	Loading SlotState = "loading" // a load or clear is in progress
	Loaded  SlotState = "loaded"  // an image is programmed and passed its self-test
	Failed  SlotState = "failed"  // the last operation failed; Reason says why
	Busy    SlotState = "busy"    // loaded and in use by a session
)

// Slot is one chip of a board.
type Slot struct {
	Index      int       `json:"index"` // host-wide: board*2 + chip
	Board      string    `json:"board"` // PCIe address of the board, or "sim:<serial>"
	BoardModel string    `json:"board_model"`
	Serial     string    `json:"serial"`
	Chip       int       `json:"chip"`
	Part       string    `json:"part"`
	State      SlotState `json:"state"`
	Reason     string    `json:"reason,omitempty"` // why the slot is failed
	Image      *Image    `json:"image,omitempty"`  // loaded image
	Role       *Role     `json:"role,omitempty"`
	Tenant     string    `json:"tenant,omitempty"` // who loaded it
	LoadedAt   time.Time `json:"loaded_at,omitzero"`
	Sensors    *Sensors  `json:"sensors,omitempty"` // only in GET /v1/slots/{n}
}

// Image identifies a loaded or cached image.
type Image struct {
	Ref     string `json:"ref,omitempty"` // as the tenant named it
	Digest  string `json:"digest"`        // manifest digest, sha256:…
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	Vendor  string `json:"vendor,omitempty"`
}

// Role is the role the shell reports in a chip's PR region.
type Role struct {
	ID      uint32 `json:"id"`
	Version string `json:"version"` // major.minor
	Name    string `json:"name"`
}

// Sensors are a chip's health readings.
type Sensors struct {
	TempC     float64 `json:"temp_c"`
	PowerW    float64 `json:"power_w"`
	VCCIntV   float64 `json:"vccint_v"`
	Clock0MHz float64 `json:"clock0_mhz"`
	Clock1MHz float64 `json:"clock1_mhz"`
	LinkUp    bool    `json:"link_up"`
	Health    string  `json:"health"` // "ok" or the chip's alarms
}

// SlotList is the answer of GET /v1/slots.
type SlotList struct {
	Slots []Slot `json:"slots"`
}

// LoadRequest starts a load. Slot selects the target: for a single-chip
// image the slot itself, for a two-chip image the board holding it. Without
// Slot the agent picks the lowest cleared slot (board) that fits.
type LoadRequest struct {
	Image string `json:"image"`
	Slot  *int   `json:"slot,omitempty"`
}

// PullRequest prefetches an image into the node cache.
type PullRequest struct {
	Image string `json:"image"`
}

// LoadState is the state of a load or pull.
type LoadState string

// Load states.
const (
	LoadRunning LoadState = "running"
	LoadDone    LoadState = "done"
	LoadFailed  LoadState = "failed"
)

// Phases of a load, in order. A pull runs the first three. Everything that
// can refuse a load (resolve, verify, key) runs before a chip is touched.
const (
	PhaseResolve  = "resolve"   // tag to digest, manifest and config
	PhaseVerify   = "verify"    // ISV signature, platform countersignature, compatibility
	PhasePull     = "pull"      // layers into the node cache
	PhaseKey      = "key"       // data key release
	PhaseProgram  = "program"   // unseal while streaming into the PR controller
	PhaseSelfTest = "self-test" // role id/version, the role's own check
)

// Load is a load (Kind "load") or a pull (Kind "pull").
type Load struct {
	ID       string      `json:"id"`
	Kind     string      `json:"kind"`
	Image    Image       `json:"image"`
	Slots    []int       `json:"slots,omitempty"`
	Tenant   string      `json:"tenant"`
	State    LoadState   `json:"state"`
	Phase    string      `json:"phase,omitempty"` // current phase while running
	Phases   []PhaseTime `json:"phases,omitempty"`
	Error    *Error      `json:"error,omitempty"`
	Started  time.Time   `json:"started"`
	Finished time.Time   `json:"finished,omitzero"`
}

// PhaseTime is how long a finished phase took.
type PhaseTime struct {
	Name       string  `json:"name"`
	DurationMS float64 `json:"duration_ms"`
	Bytes      int64   `json:"bytes,omitempty"`
	CacheHit   bool    `json:"cache_hit,omitempty"`
}

// Event is one line of a load's event stream: progress of a phase, or, as
// the last line, the finished load.
type Event struct {
	Phase string `json:"phase,omitempty"`
	Bytes int64  `json:"bytes,omitempty"` // done so far in this phase
	Total int64  `json:"total,omitempty"` // 0 when unknown
	Load  *Load  `json:"load,omitempty"`  // set on the last event
}

// CachedBlob is one entry of the node cache.
type CachedBlob struct {
	Digest   string    `json:"digest"`
	Size     int64     `json:"size"`
	LastUsed time.Time `json:"last_used"`
}

// ImageList is the answer of GET /v1/images.
type ImageList struct {
	Images    []CachedBlob `json:"images"`
	UsedBytes int64        `json:"used_bytes"`
	MaxBytes  int64        `json:"max_bytes"`
}

// Code classifies an error for programs; Error.Message is for people.
type Code string

// Error codes.
const (
	CodeBadRequest      Code = "bad_request"
	CodeUnauthenticated Code = "unauthenticated"   // no or bad credentials
	CodePermission      Code = "permission_denied" // the slot belongs to someone else
	CodeNotFound        Code = "not_found"         // slot, load or image unknown
	CodeNotEntitled     Code = "not_entitled"      // the registry refused the tenant this image
	CodeSpendLimit      Code = "spend_limit"       // the tenant's spend this month reached its limit: no new loads
	CodeSignature       Code = "signature_invalid" // ISV signature missing, invalid or its key revoked
	CodeCountersign     Code = "countersignature_missing"
	CodeIncompatible    Code = "incompatible"         // shell version, board model or part mismatch
	CodeBusy            Code = "slot_busy"            // the slot is loading, loaded or in use
	CodeCacheFull       Code = "cache_full"           // the node cache cannot hold the image
	CodeUnavailable     Code = "registry_unavailable" // the registry did not answer; retry later
	CodeProgram         Code = "program_failed"       // the shell refused the bitstream; slots rolled back
	CodeSelfTest        Code = "selftest_failed"
	CodeInternal        Code = "internal"

	// Codes of tenant sessions (POST /v1/slots/{n}/session, package
	// sdk/agentapi/session).
	CodeBadHandle     Code = "bad_handle"      // no such buffer or program in this session: forged, freed or another's
	CodeQuota         Code = "quota_exceeded"  // the tenant's device memory quota, or no free window
	CodeOutOfRange    Code = "out_of_range"    // an access outside the buffer
	CodeRefused       Code = "program_refused" // an instruction reaches outside the session's buffers
	CodeInUse         Code = "in_use"          // freeing a buffer a live program references
	CodeSessionClosed Code = "session_closed"  // the session ended (closed, slot cleared or reloaded)
	CodeCanceled      Code = "canceled"        // the request or job was cancelled
	CodeJobTimeout    Code = "job_timeout"     // the job ran longer than faasd's time limit and was aborted
)

// Error is the body of a failed request and the error of a failed load.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Hint    string `json:"hint,omitempty"` // what to do about it
}

// ErrorBody wraps Error in responses.
type ErrorBody struct {
	Error Error `json:"error"`
}

// NodeInfo is GET /v1/node: which registry node this agent is, so that a
// client attached through the pool knows when the node is its own host.
type NodeInfo struct {
	NodeID string `json:"node_id"` // "" when the agent reports to no registry
}
