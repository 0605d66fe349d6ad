package registryapi

import "time"

// UsageReport is the body of POST /usage: records of what a node ran.
type UsageReport struct {
	NodeID  string        `json:"node_id"`
	Records []UsageRecord `json:"records"` // 1 to MaxUsageRecords
}

// MaxUsageRecords is the most records one report may carry.
const MaxUsageRecords = 1000

// UsageRecord is one record of a node's usage report.
type UsageRecord struct {
	ReportID       string     `json:"report_id"`
	TenantID       string     `json:"tenant_id"`
	ListingID      *string    `json:"listing_id,omitempty"`
	ManifestDigest *string    `json:"digest,omitempty"`
	Board          string     `json:"board,omitempty"`
	Slot           *int       `json:"slot,omitempty"`
	Event          string     `json:"event"` // load, clear or busy
	BusyNs         int64      `json:"busy_ns,omitempty"`
	StartedAt      *time.Time `json:"started_at,omitempty"`
	EndedAt        *time.Time `json:"ended_at,omitempty"`
	// GrantID is the load grant under which the node loaded the image
	// (Grant.ID); the registry accepts usage only for those.
	GrantID string `json:"grant_id"`
}

// UsageAccepted answers POST /usage: how many records were new, and how
// many carried a report id the registry already had.
type UsageAccepted struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
}

// UsageSummary is the usage of one tenant on one listing with its cost,
// of the records made on one day (UTC) when asked per day. Costs are at
// the prices in force when the usage happened (Price), time split where a
// price changed; each time cost is rounded down to the micro-unit once.
// The price fields are the listing's prices now, for reference.
type UsageSummary struct {
	Day         string `json:"day,omitempty"` // YYYY-MM-DD, with ?by=day
	ListingID   string `json:"listing_id"`
	ListingName string `json:"listing_name"`
	TenantID    string `json:"tenant_id"`
	Tenant      string `json:"tenant"`
	Currency    string `json:"currency"`
	Loads       int64  `json:"loads"`
	Clears      int64  `json:"clears"`
	BusyNs      int64  `json:"busy_ns"`
	// Attachments counts the pool's attachments and AttachedNs the time
	// they were held (an ended one's, or a live one's so far).
	Attachments                int64 `json:"attachments"`
	AttachedNs                 int64 `json:"attached_ns"`
	PricePerHourMicros         int64 `json:"price_per_hour_micros"`
	PricePerLoadMicros         int64 `json:"price_per_load_micros"`
	PricePerAttachedHourMicros int64 `json:"price_per_attached_hour_micros"`
	LoadCostMicros             int64 `json:"load_cost_micros"`
	// TimeCostMicros prices BusyNs, AttachedCostMicros AttachedNs.
	TimeCostMicros     int64 `json:"time_cost_micros"`
	AttachedCostMicros int64 `json:"attached_cost_micros"`
	TotalMicros        int64 `json:"total_micros"`
}

// UsageSummaries answers GET /usage/summary.
type UsageSummaries struct {
	Items       []UsageSummary `json:"items"`
	TotalMicros int64          `json:"total_micros"`
}
