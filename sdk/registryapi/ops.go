package registryapi

import (
	"encoding/json"
	"time"
)

// AuditEntry is a row of the audit log.
type AuditEntry struct {
	ID         int64           `json:"id"`
	At         time.Time       `json:"at"`
	ActorID    *string         `json:"actor_id,omitempty"`
	ActorName  string          `json:"actor"`
	Action     string          `json:"action"`
	TargetType string          `json:"target_type"`
	TargetID   string          `json:"target_id"`
	Outcome    string          `json:"outcome"`
	RequestID  string          `json:"request_id"`
	RemoteAddr string          `json:"remote_addr"`
	Details    json.RawMessage `json:"details"`
}

// ValidationJob is a row of the validation queue.
type ValidationJob struct {
	ID          string          `json:"id"`
	Repository  string          `json:"repository"`
	Digest      string          `json:"digest"`
	ListingID   *string         `json:"listing_id,omitempty"`
	ListingName string          `json:"listing_name,omitempty"`
	State       string          `json:"state"` // pending, validating, available, failed
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	Reasons     json.RawMessage `json:"reasons"`
	RunAfter    time.Time       `json:"run_after"`
	LeaseUntil  *time.Time      `json:"lease_until,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	FinishedAt  *time.Time      `json:"finished_at,omitempty"`
}

// Load is one slot running an image loaded for the caller, as the node's
// last heartbeat shows it.
type Load struct {
	NodeID          string     `json:"node_id"`
	Hostname        string     `json:"hostname"`
	Board           string     `json:"board"`
	Slot            int        `json:"slot"`
	State           string     `json:"state"`
	Digest          string     `json:"digest"`
	ListingID       *string    `json:"listing_id,omitempty"`
	ListingName     string     `json:"listing_name,omitempty"`
	LoadedAt        *time.Time `json:"loaded_at,omitempty"`
	LastHeartbeatAt *time.Time `json:"last_heartbeat_at,omitempty"`
}
