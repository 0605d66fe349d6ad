// Package poolapi is the wire contract of the registry's accelerator pool
// (/api/v1/attachments): what a tenant asks for and is given
// (an attachment: a slot on some node, a credential for it and a lease),
// and what a node's faasd is assigned and reports back.
//
// # Tenant side
//
//	POST   /api/v1/attachments            AttachRequest → 201 Attachment (with Credential, once);
//	                                      409 when no node has room (of the image's part, outside ExcludeNodes)
//	GET    /api/v1/attachments            → AttachmentList (the caller's; an admin's: all)
//	GET    /api/v1/attachments/{id}?wait=30s&since=STATE
//	                                      → Attachment, after its state differs from STATE or wait passed
//	POST   /api/v1/attachments/{id}/renew → Attachment with the lease extended; 410 when it ended
//	DELETE /api/v1/attachments/{id}       → Attachment, detached
//
// The credential, "faasa_<attachment id>_<secret>", opens sessions on the
// attachment's slot of that node and nothing else; the registry keeps only
// its SHA-256 and hands the node that. The tenant reaches the node at
// Endpoint over TLS 1.3 and verifies the node's certificate against
// TLSCertificate (pinned at the node's first heartbeat) under ServerName.
//
// # Node side (the node's account, for its own node only)
//
//	GET  /api/v1/nodes/{id}/assignments?since=REV&wait=30s → Assignments, once its revision passes REV
//	POST /api/v1/nodes/{id}/attachments/{aid}/grant        → a load grant (nodetrust.Grant) for the assignment
//	POST /api/v1/nodes/{id}/attachments/{aid}/state        StateReport → 204
//
// Assignments is the node's desired state: every live attachment placed
// on it, and every ended one it has not yet released. The node loads the
// live ones, reporting loading then ready (or failed), and releases ended
// ones: it revokes the credential, ends their sessions, clears and scrubs
// the slot (or keeps the image loaded for the same tenant when KeepWarm),
// then reports released.
package poolapi

import "time"

// Credential forms: the tenant's credential is CredentialPrefix + id +
// "_" + base64url (no padding) of a 32-byte secret; CredentialSHA256 is
// the hex SHA-256 of those 32 bytes.
const CredentialPrefix = "faasa_"

// ServerName is the TLS server name a node's certificate carries and a
// tenant verifies: "<node id>.node.faas".
func ServerName(nodeID string) string { return nodeID + ".node.faas" }

// Lease bounds, in seconds.
const (
	DefaultLeaseSeconds = 30
	MinLeaseSeconds     = 2
	MaxLeaseSeconds     = 600
)

// State is where an attachment is in its life.
type State string

const (
	Pending  State = "pending"  // placed on a node that has not started on it
	Loading  State = "loading"  // the node is loading the image
	Ready    State = "ready"    // sessions may be opened with the credential
	Failed   State = "failed"   // the node could not load it (Error says why)
	Detached State = "detached" // the tenant detached
	Expired  State = "expired"  // the lease was not renewed in time
	Lost     State = "lost"     // the node stopped heartbeating
)

// Live reports whether the attachment holds its slot.
func (s State) Live() bool { return s == Pending || s == Loading || s == Ready }

// AttachRequest asks for an accelerator running a listing's image.
type AttachRequest struct {
	// Listing is the listing's id or its repository ("acme/mnist").
	Listing string `json:"listing"`
	// Version is a version of the listing; "" is its newest.
	Version string `json:"version,omitempty"`
	// Share asks for a tenant window on a chip (possibly one already
	// running the image for others) instead of whole chips.
	Share bool `json:"share,omitempty"`
	// LeaseSeconds is the lease the SDK renews; 0 is DefaultLeaseSeconds.
	LeaseSeconds int `json:"lease_seconds,omitempty"`
	// ExcludeNodes are node ids not to place the attachment on: the SDK
	// names the nodes where an earlier attempt failed, so that it is
	// placed elsewhere. At most MaxExcludeNodes.
	ExcludeNodes []string `json:"exclude_nodes,omitempty"`
}

// MaxExcludeNodes bounds AttachRequest.ExcludeNodes.
const MaxExcludeNodes = 32

// Attempt is one placement an attach tried: where the registry placed
// it and how it ended. The SDK reports every attempt of an attach, the
// failed ones and the last.
type Attempt struct {
	Attachment string `json:"attachment"` // the attachment's id
	NodeID     string `json:"node_id"`
	Node       string `json:"node"` // the node's hostname
	Slot       int    `json:"slot"`
	State      State  `json:"state"`
	// Error says why it failed (Failed), as the node reported it; or why
	// no attachment was made at all (no Attachment then).
	Error string `json:"error,omitempty"`
}

// Attachment is an accelerator of the pool held by a tenant.
type Attachment struct {
	ID         string `json:"id"`
	Tenant     string `json:"tenant"`
	ListingID  string `json:"listing_id"`
	Listing    string `json:"listing"` // the listing's name
	Version    string `json:"version"`
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
	Share      bool   `json:"share"`
	State      State  `json:"state"`
	Error      string `json:"error,omitempty"`
	// Warm is set when the attachment was placed on a slot that already
	// held the image for the tenant, so that no load was needed.
	Warm bool `json:"warm"`

	NodeID         string `json:"node_id"`
	Node           string `json:"node"` // the node's hostname
	Endpoint       string `json:"endpoint"`
	ServerName     string `json:"server_name"`
	TLSCertificate string `json:"tls_certificate"`
	// Slot is the slot sessions open on (a two-chip image: its first).
	Slot int `json:"slot"`
	// Credential is set only in the answer that creates the attachment.
	Credential string `json:"credential,omitempty"`

	LeaseSeconds   int        `json:"lease_seconds"`
	LeaseExpiresAt time.Time  `json:"lease_expires_at"`
	CreatedAt      time.Time  `json:"created_at"`
	ReadyAt        *time.Time `json:"ready_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
}

// AttachmentList is a page of attachments.
type AttachmentList struct {
	Attachments []Attachment `json:"attachments"`
}

// Assignment is one attachment as its node sees it.
type Assignment struct {
	ID         string `json:"id"`
	TenantID   string `json:"tenant_id"`
	Tenant     string `json:"tenant"`
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
	// Slot is the slot to load (a two-chip image: the board's first).
	Slot int `json:"slot"`
	// Chips is how many chips the image takes (1 or 2).
	Chips int  `json:"chips"`
	Share bool `json:"share"`
	// CredentialSHA256 is the hex SHA-256 of the credential's secret.
	CredentialSHA256 string `json:"credential_sha256"`
	State            State  `json:"state"`
	// KeepWarm, on an ended assignment, lets the node keep the image
	// loaded for the same tenant instead of clearing the slot.
	KeepWarm bool `json:"keep_warm,omitempty"`
}

// Assignments is a node's desired state at Revision.
type Assignments struct {
	Revision    int64        `json:"revision"`
	Assignments []Assignment `json:"assignments"`
}

// Node reports, besides Loading, Ready and Failed.
const Released State = "released" // the node let go of an ended attachment

// StateReport is what a node reports of an assignment.
type StateReport struct {
	State State `json:"state"` // Loading, Ready, Failed or Released
	// Slots are the slots the image was loaded into (Ready).
	Slots []int  `json:"slots,omitempty"`
	Error string `json:"error,omitempty"` // Failed: why, for the tenant
	// Scrubbed (Released): the slot was cleared and its memory zeroed;
	// false when it was kept warm.
	Scrubbed bool `json:"scrubbed,omitempty"`
}
