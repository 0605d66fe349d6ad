package registryapi

import "time"

// TagRule makes the tags of a listing's repository that match Pattern
// immutable once set: such a tag may be pushed while it does not exist and
// again with the digest it names, never moved or deleted. Pattern is Go's
// path.Match syntax ("v*", "release-*", "v[0-9]*"). Tags that name a
// version of the listing are immutable without a rule; cosign's
// signature, attestation and SBOM tags (sha256-<hex>.sig, .att, .sbom)
// never are, since signing, the platform's countersignature included,
// appends to them.
type TagRule struct {
	ID        string    `json:"id"`
	Pattern   string    `json:"pattern"`
	CreatedAt time.Time `json:"created_at"`
}

// NewTagRule is the body of POST /listings/{id}/tag-rules.
type NewTagRule struct {
	Pattern string `json:"pattern"`
}

// MaxTagRules bounds the rules of one repository.
const MaxTagRules = 32

// Tag is the state of one tag of a listing's repository: the digest it
// names ("" when unset) and, when a push of another image or a delete
// would be refused, why (Immutable, Reason naming the version or rule).
type Tag struct {
	Name      string `json:"name"`
	Digest    string `json:"digest,omitempty"`
	Immutable bool   `json:"immutable"`
	Reason    string `json:"reason,omitempty"`
}
