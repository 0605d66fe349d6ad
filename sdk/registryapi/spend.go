package registryapi

import "time"

// MaxSpendMicros bounds a spend limit or alert: a thousand million units
// of the currency.
const MaxSpendMicros = 1_000_000_000_000_000

// SpendLimit is a tenant's spend of the current month (UTC) in one
// currency against its alert threshold and hard limit, in integer
// micro-units of that currency. Spend is the month's usage priced as the
// month's invoice prices it (the price in force at each moment, free trial
// time free), an attachment still held counted up to now.
type SpendLimit struct {
	Currency    string `json:"currency"`
	SpendMicros int64  `json:"spend_micros"`
	// AlertMicros: once SpendMicros reaches it, one spend.threshold_reached
	// event is written for the month; nil: no alert.
	AlertMicros *int64 `json:"alert_micros"`
	// LimitMicros: once SpendMicros reaches it, new loads and attachments
	// are refused (CodeSpendLimit); nil: no limit.
	LimitMicros *int64     `json:"limit_micros"`
	Reached     bool       `json:"reached"` // SpendMicros >= LimitMicros
	UpdatedAt   *time.Time `json:"updated_at,omitempty"`
}

// SpendLimits answers GET /accounts/{name}/spend-limits: the tenant's
// limits and, for every currency it has a limit in or spent in this month,
// its spend.
type SpendLimits struct {
	Tenant string       `json:"tenant"`
	Month  string       `json:"month"` // YYYY-MM, UTC
	Items  []SpendLimit `json:"items"`
}

// SpendLimitUpdate is the body of PUT /accounts/{name}/spend-limits/{currency}:
// the alert threshold and hard limit of that currency, each 0 to
// MaxSpendMicros or null for none; the alert must not exceed the limit.
// Both null remove the currency's limits.
type SpendLimitUpdate struct {
	AlertMicros *int64 `json:"alert_micros"`
	LimitMicros *int64 `json:"limit_micros"`
}
