package registryapi

import (
	"encoding/json"
	"time"
)

// Node is a registered node agent.
type Node struct {
	ID              string          `json:"id"`
	AccountID       string          `json:"account_id"`
	Hostname        string          `json:"hostname"`
	PublicKey       string          `json:"public_key"`
	Boards          json.RawMessage `json:"boards"` // []Board of its last heartbeat
	RegisteredAt    time.Time       `json:"registered_at"`
	LastHeartbeatAt *time.Time      `json:"last_heartbeat_at,omitempty"`
	// ApprovedAt is when an operator approved the node, or it enrolled
	// with a one-time token; until then no key is released to it.
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
	ApprovedBy string     `json:"approved_by,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
	// Endpoint is the https URL the node serves remote attach at, and
	// TLSCertificate the PEM certificate pinned for it: tenants verify the
	// node's TLS against it under ServerName, not against a CA.
	Endpoint       string `json:"endpoint"`
	TLSCertificate string `json:"tls_certificate"`
	ServerName     string `json:"server_name"`
}

// NodeRegistration is the body of POST /nodes.
type NodeRegistration struct {
	Hostname  string `json:"hostname"`
	PublicKey string `json:"public_key"` // base64 of the node's X25519 public key
	// EnrollmentToken, a one-time token an operator made, approves the
	// node at once; without it the node waits for approval.
	EnrollmentToken string `json:"enrollment_token,omitempty"`
}

// Heartbeat is the body of POST /nodes/{id}/heartbeat.
type Heartbeat struct {
	Boards []Board `json:"boards"`
	// Endpoint and TLSCertificate, sent together, say where and with which
	// certificate the node serves remote attach.
	Endpoint       string `json:"endpoint,omitempty"`
	TLSCertificate string `json:"tls_certificate,omitempty"`
}

// Board is one board of a heartbeat.
type Board struct {
	Model string `json:"model"`
	Slots []Slot `json:"slots"`
}

// Slot is the state of one slot of a board.
type Slot struct {
	Index  int    `json:"index"`
	State  string `json:"state"` // cleared, loading, loaded, busy, failed
	Digest string `json:"digest,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Part is the chip's FPGA part (shell.Part.Name). Optional: the
	// registry knows the parts of the board models of shell v1 from
	// Board.Model; a node reports it for a model the registry may not know.
	Part string `json:"part,omitempty"`
}

// NewEnrollment is the body of POST /node-enrollments.
type NewEnrollment struct {
	TTLSeconds int64 `json:"ttl_seconds,omitempty"` // 0: the registry's default
}

// Enrollment is a one-time enrollment token; Token is shown once.
type Enrollment struct {
	ID        string    `json:"id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}
