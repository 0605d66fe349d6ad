package registryapi

import "time"

// GrantRequest is the body of POST /load-grants: the load a tenant lets a
// node make for it.
type GrantRequest struct {
	NodeID     string `json:"node_id"`
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
}

// Grant is an issued load grant. Secret is set only when issued; the node
// presents it to key release and names ID in its usage reports.
type Grant struct {
	ID         string    `json:"id"`
	Secret     string    `json:"grant,omitempty"`
	TenantID   string    `json:"tenant_id"`
	NodeID     string    `json:"node_id"`
	Repository string    `json:"repository"`
	Digest     string    `json:"digest"`
	ListingID  *string   `json:"listing_id,omitempty"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// KeyRelease is the body of POST /keys/release: a node asks for the data
// keys of a sealed image, wrapped to its own key.
type KeyRelease struct {
	NodeID     string `json:"node_id"`
	TenantID   string `json:"tenant_id,omitempty"`
	Tenant     string `json:"tenant,omitempty"`
	Repository string `json:"repository"`
	Digest     string `json:"digest"`
	// Grant is the load grant the tenant's credentials obtained for this
	// node and image (POST /load-grants); the release spends it.
	Grant string `json:"grant"`
}

// WrappedKey is one released key.
type WrappedKey struct {
	Chip       string `json:"chip"`
	Layer      string `json:"layer"`
	KeyID      string `json:"key_id"`
	WrappedKey string `json:"wrapped_key"` // base64 of seal.WrappedKey's binary form
}

// KeyReleaseResult is the answer of a key release.
type KeyReleaseResult struct {
	WrappedKeys []WrappedKey `json:"wrapped_keys"`
}
