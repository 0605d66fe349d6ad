// Package webhooks delivers the registry's notifications to the webhooks
// accounts register, signed, retried and logged.
//
// Events are rows of the events table, written by whatever caused them in
// the same transaction (the validation worker, a subscription), and fanned
// out by a trigger to one row of webhook_deliveries per subscribed webhook
// (migrations/012_webhooks.sql). A Worker, one per replica, claims due
// deliveries with leases (for update skip locked, so replicas never send
// the same attempt twice at once) and POSTs the event as JSON:
//
//	{"id": EVENT ID, "type": TYPE, "created_at": RFC 3339, "data": {...}}
//
// with the headers
//
//	Content-Type:   application/json
//	User-Agent:     faas-webhooks/1
//	Faas-Event:     TYPE
//	Faas-Event-Id:  EVENT ID (the same on every attempt and redelivery: dedupe by it)
//	Faas-Delivery:  DELIVERY ID (a redelivery by hand has its own)
//	Faas-Signature: t=UNIX SECONDS,v1=hex(HMAC-SHA256(secret, "UNIX SECONDS." + body))
//
// as Stripe signs: the timestamp is signed with the body, so a receiver
// that refuses timestamps older than a few minutes (Verify, with
// DefaultTolerance) is safe from replays of a captured delivery. A 2xx
// answer within Config.Timeout is success; anything else (another status,
// a redirect, which is never followed, a timeout, a refused address) is an
// attempt failed, retried after Config.Backoff doubled per attempt, with
// ±20% jitter, up to Config.MaxAttempts attempts, after which the delivery
// is failed. Delivery is at least once: a worker stopped in the middle of
// an attempt hands the delivery back, uncounted, and one that crashed
// loses it to another worker when its lease (Config.Lease) runs out.
//
// Addresses: a delivery connects only to public addresses. The dialer
// refuses loopback, private, link-local, unique-local, CGNAT, multicast
// and unspecified addresses after the name is resolved, at connect time, so
// a name that resolves to an internal address (or changes to one after the
// webhook was registered) is refused too; no proxy from the environment is
// used. Config.AllowLoopback admits loopback addresses, and plain http to
// them, for tests and development only.
//
// The Worker also scans API tokens every Config.ScanInterval and writes a
// token.expiring event for each that expires within Config.ExpiryNotice,
// once per token, and deletes events older than Config.Retention with
// their deliveries.
package webhooks
