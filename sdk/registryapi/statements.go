package registryapi

import "time"

// Monthly statements. A month (UTC, "YYYY-MM") is billed when an operator
// closes it (POST /months/{month}/close) after it has ended; from then on
// its lines are stored and never change. Usage of a closed month that
// arrives later, and usage older than the first month ever closed, is
// billed as adjustment lines (ForMonth before Month) of the next month
// closed. Until a month is closed its statements are a preview of what
// closing it would store once the months before it are closed: its own
// usage, and adjustments for the months closed already (for all earlier
// months, before the first close).

// Units of statement lines.
const (
	UnitLoad         = "load"          // Quantity: loads
	UnitLoadedHour   = "loaded_hour"   // Quantity: nanoseconds busy, less the free trial's
	UnitAttachedHour = "attached_hour" // Quantity: nanoseconds attached from the pool, less the free trial's
	// UnitTrialHour: nanoseconds busy or attached that the listing's free
	// trial (Listing.TrialHours) covers; its amount is always 0, so the
	// ISV's gross excludes it.
	UnitTrialHour = "trial_hour"
)

// StatementLine is the usage of one listing version in one unit, for one
// month, priced at the prices in force at each moment; amounts of time
// are rounded down to the micro-unit once per line.
type StatementLine struct {
	// ForMonth is the month the usage happened in: the statement's month,
	// or an earlier one on an adjustment line.
	ForMonth  string `json:"for_month"`
	ListingID string `json:"listing_id"`
	Listing   string `json:"listing"`
	// Version is the listing's version of the image used ("" when the
	// image is no version of the listing).
	Version      string `json:"version"`
	Unit         string `json:"unit"`     // UnitLoad, UnitLoadedHour, UnitAttachedHour or UnitTrialHour
	Quantity     int64  `json:"quantity"` // loads or nanoseconds; negative on a correction downwards
	AmountMicros int64  `json:"amount_micros"`
}

// Invoice is what one tenant owes for one month in one currency.
type Invoice struct {
	Month       string          `json:"month"` // YYYY-MM
	TenantID    string          `json:"tenant_id"`
	Tenant      string          `json:"tenant"`
	Currency    string          `json:"currency"`
	Closed      bool            `json:"closed"`
	ClosedAt    *time.Time      `json:"closed_at,omitempty"`
	Lines       []StatementLine `json:"lines"`
	TotalMicros int64           `json:"total_micros"`
}

// RevenueStatement is what one ISV's listings earned in one month in one
// currency: the tenants' invoice lines of its listings, summed over the
// tenants; the platform's fee, FeeBasisPoints of the gross (rounded down
// to the micro-unit); and the net, gross less fee.
type RevenueStatement struct {
	Month          string          `json:"month"`
	ISVID          string          `json:"isv_id"`
	ISV            string          `json:"isv"`
	Currency       string          `json:"currency"`
	Closed         bool            `json:"closed"`
	ClosedAt       *time.Time      `json:"closed_at,omitempty"`
	Lines          []StatementLine `json:"lines"`
	GrossMicros    int64           `json:"gross_micros"`
	FeeBasisPoints int             `json:"fee_basis_points"`
	FeeMicros      int64           `json:"fee_micros"`
	NetMicros      int64           `json:"net_micros"`
}

// MonthClosed answers POST /months/{month}/close.
type MonthClosed struct {
	Month          string    `json:"month"`
	ClosedAt       time.Time `json:"closed_at"`
	FeeBasisPoints int       `json:"fee_basis_points"`
	Lines          int       `json:"lines"` // lines stored, adjustments included
}
