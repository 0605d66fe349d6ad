package registryapi

import "time"

// Account is the API view of an account.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Role      string    `json:"role"` // isv, tenant, admin or node
	Disabled  bool      `json:"disabled"`
	CreatedAt time.Time `json:"created_at"`
}

// NewAccount is the body of POST /accounts.
type NewAccount struct {
	Name     string `json:"name"`
	Role     string `json:"role"`
	Password string `json:"password"`
}

// AccountUpdate is the body of PATCH /accounts/{id}; nil fields stay.
type AccountUpdate struct {
	Role     *string `json:"role"`
	Disabled *bool   `json:"disabled"`
}

// Token is an API token's description; Secret is set only on creation.
type Token struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Secret     string     `json:"secret,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at,omitempty"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// NewToken is the body of POST /tokens.
type NewToken struct {
	Name      string     `json:"name"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"` // nil: never
}

// SigningKey is an ISV's registered public key.
type SigningKey struct {
	ID        string     `json:"id"`
	AccountID string     `json:"account_id"`
	KeyID     string     `json:"key_id"`
	Algorithm string     `json:"algorithm"`
	PublicKey string     `json:"public_key"` // PEM
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// NewSigningKey is the body of POST /keys: a PEM ECDSA P-256 public key.
type NewSigningKey struct {
	PublicKey string `json:"public_key"`
}

// RepositoryKeys answers GET /signing-keys: the public keys that may sign
// the images of a repository, for nodes verifying before they load.
type RepositoryKeys struct {
	Repository string       `json:"repository"`
	ISV        string       `json:"isv"`
	Keys       []SigningKey `json:"keys"`
}
