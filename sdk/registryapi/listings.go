package registryapi

import (
	"encoding/json"
	"time"
)

// Listing is an IP listing of the marketplace.
type Listing struct {
	ID          string `json:"id"`
	OwnerID     string `json:"owner_id"`
	Owner       string `json:"owner"`
	Repository  string `json:"repository"`
	Name        string `json:"name"`
	Summary     string `json:"summary"`
	Description string `json:"description"`
	Category    string `json:"category"`
	BoardModel  string `json:"board_model"`
	Currency    string `json:"currency"`
	// The prices in force now (Price); the listing's price history and
	// scheduled prices are at /listings/{id}/prices.
	PricePerHourMicros         int64  `json:"price_per_hour_micros"`
	PricePerLoadMicros         int64  `json:"price_per_load_micros"`
	PricePerAttachedHourMicros int64  `json:"price_per_attached_hour_micros"`
	Visibility                 string `json:"visibility"` // private, shared or public
	// TrialHours: each tenant's first TrialHours hours of loaded and
	// attached time of the listing, in total, are free (a trial_hour line
	// of amount 0 on its invoices).
	TrialHours int  `json:"trial_hours"`
	Published  bool `json:"published"`
	// Validated: a version of the listing passed validation (signed by its
	// ISV, countersigned by the platform); the marketplace's badge.
	Validated bool `json:"validated"`
	// LogoDigest is "sha256:<hex>" of the listing's logo, the PNG at
	// /listings/{id}/logo (its ETag), or "" when it has none.
	LogoDigest string    `json:"logo_digest,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// ListingFields are a listing's editable fields: the body of PATCH
// /listings/{id}, where nil fields stay as they are. Prices that differ
// from those in force make a new Price, effective at once; the currency
// cannot change once the listing has usage, whose prices are in it.
type ListingFields struct {
	Name                       *string `json:"name"`
	Summary                    *string `json:"summary"`
	Description                *string `json:"description"`
	Category                   *string `json:"category"`
	BoardModel                 *string `json:"board_model"`
	Currency                   *string `json:"currency"`
	PricePerHourMicros         *int64  `json:"price_per_hour_micros"`
	PricePerLoadMicros         *int64  `json:"price_per_load_micros"`
	PricePerAttachedHourMicros *int64  `json:"price_per_attached_hour_micros"`
	Visibility                 *string `json:"visibility"`
	TrialHours                 *int    `json:"trial_hours"` // 0 to MaxTrialHours; fixed once the listing has usage
}

// MaxTrialHours bounds a listing's free trial.
const MaxTrialHours = 10000

// Price is a listing's prices from EffectiveAt until the next Price's, in
// integer micro-units of the listing's currency: per load, per hour a slot
// is busy, and per hour an attachment of the pool is held. Prices in force
// or past are history and never change.
type Price struct {
	EffectiveAt           time.Time `json:"effective_at"`
	PerLoadMicros         int64     `json:"per_load_micros"`
	PerHourMicros         int64     `json:"per_hour_micros"`
	PerAttachedHourMicros int64     `json:"per_attached_hour_micros"`
	CreatedAt             time.Time `json:"created_at"`
}

// MaxPriceMicros bounds every price (a million units of the currency), so
// that a month's bill of any listing stays far inside int64 micro-units.
const MaxPriceMicros = 1_000_000_000_000

// NewPrice is the body of POST /listings/{id}/prices: prices effective at
// EffectiveAt (nil: now), which must not be in the past; a nil price is
// the one that would be in force at EffectiveAt. A new price at the time of
// one already scheduled replaces it.
type NewPrice struct {
	EffectiveAt           *time.Time `json:"effective_at"`
	PerLoadMicros         *int64     `json:"per_load_micros"`
	PerHourMicros         *int64     `json:"per_hour_micros"`
	PerAttachedHourMicros *int64     `json:"per_attached_hour_micros"`
}

// NewListing is the body of POST /listings: its fields (Name required)
// and the repository, under the ISV's namespace, whose images it sells.
type NewListing struct {
	ListingFields
	Repository string `json:"repository"`
}

// Version is a listing version with its image's validation state.
type Version struct {
	Version        string          `json:"version"`
	ManifestDigest string          `json:"digest"`
	State          string          `json:"state"` // pending, validating, available, failed
	Reasons        json.RawMessage `json:"reasons"`
	Attempts       int             `json:"attempts"`
	CreatedAt      time.Time       `json:"created_at"`
	ValidatedAt    *time.Time      `json:"validated_at,omitempty"`
	// Loads30d: loads of the version's image in the last 30 days.
	Loads30d int64 `json:"loads_30d"`
}

// NewVersion is the body of POST /listings/{id}/versions.
type NewVersion struct {
	Version string `json:"version"`
	Digest  string `json:"digest"`
}

// Entitlement grants an account access to a listing.
type Entitlement struct {
	ID          string     `json:"id"`
	ListingID   string     `json:"listing_id"`
	ListingName string     `json:"listing_name"`
	AccountID   string     `json:"account_id"`
	Account     string     `json:"account"`
	Kind        string     `json:"kind"` // subscription, purchase or share
	GrantedBy   *string    `json:"granted_by,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   *time.Time `json:"expires_at,omitempty"`
	RevokedAt   *time.Time `json:"revoked_at,omitempty"`
}

// NewShare is the body of POST /listings/{id}/shares: the tenant account
// the ISV shares a listing with.
type NewShare struct {
	Account string `json:"account"`
}

// Logos. PUT /listings/{id}/logo takes the image as the raw body, of a
// LogoTypes Content-Type and at most MaxLogoBytes, at most MaxLogoSide
// pixels a side and at most MaxLogoAspect times wider than high or higher
// than wide. The registry decodes it and keeps a PNG of it made anew,
// scaled to fit LogoSide×LogoSide, never the bytes uploaded; GET serves
// that PNG (image/png, ETag the Listing's LogoDigest).
const (
	MaxLogoBytes  = 256 << 10
	MaxLogoSide   = 1024
	MaxLogoAspect = 8
	LogoSide      = 256
)

// LogoTypes are the logo's accepted Content-Types; never SVG, whose
// script and external references would be the listing's to serve.
var LogoTypes = []string{"image/png", "image/jpeg", "image/webp"}

// MaxDocsBytes bounds a version's documentation.
const MaxDocsBytes = 64 << 10

// VersionDocs is a version's documentation, Markdown: the answer of GET
// /listings/{id}/versions/{version}/docs ("" and no UpdatedAt when the
// ISV has written none).
type VersionDocs struct {
	Version   string     `json:"version"`
	Markdown  string     `json:"markdown"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// NewVersionDocs is the body of PUT /listings/{id}/versions/{version}/docs:
// the version's documentation, replacing any it had ("" removes it), of
// at most MaxDocsBytes.
type NewVersionDocs struct {
	Markdown string `json:"markdown"`
}
