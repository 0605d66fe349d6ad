package regclient

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/fpga-faas/faas/services/registry/api"
)

// MaxPendingUsage bounds the usage records a Client keeps for a registry
// that does not take them. A node loads and clears a few slots a minute,
// so this is days of usage; past it the oldest reports are dropped (and
// logged), so that an outage of the registry cannot exhaust the node's
// memory.
const MaxPendingUsage = 100_000

// The backoff between attempts to send usage the registry did not take:
// from usageRetryMin, doubling to usageRetryMax, or the registry's
// Retry-After when that is longer (but never past usageRetryMax).
const (
	usageRetryMin     = time.Second
	usageRetryMax     = time.Minute
	usageSendTimeout  = 30 * time.Second
	usageLogEveryFail = 10 // while failing, log the first failure and then every tenth
)

// usageQueue holds the usage reports a Client has yet to deliver, in the
// order they were queued, and whether a sender is running.
type usageQueue struct {
	mu      sync.Mutex
	reports []usageReport
	records int // in reports
	sending bool
	idle    chan struct{} // closed when the queue empties; nil while nothing waits
}

type usageReport struct {
	nodeID string
	recs   []api.UsageRecord
}

// QueueUsage hands usage records of node nodeID to the client and returns
// at once. A goroutine sends them (ReportUsage), one call per QueueUsage in
// order, and keeps a report the registry did not take for a reason that
// passes (Temporary: unreachable, 5xx such as the 503 of a database that is
// out of disk space, read-only or down, 429) to send again, with backoff,
// until it is taken: report ids make the resends idempotent. A report the
// registry refuses (422: no grant backs it) is dropped and logged; sending
// it again would be refused again. The goroutine ends when the queue is
// empty. The queue lives in memory: usage still queued when faasd stops
// is lost.
func (c *Client) QueueUsage(nodeID string, recs []api.UsageRecord) {
	if len(recs) == 0 {
		return
	}
	q := &c.usage
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reports = append(q.reports, usageReport{nodeID: nodeID, recs: recs})
	q.records += len(recs)
	for q.records > MaxPendingUsage && len(q.reports) > 1 {
		old := q.reports[0]
		q.reports = q.reports[1:]
		q.records -= len(old.recs)
		c.log.Error("usage report dropped: too many reports wait for the registry",
			"records", len(old.recs), "pending", q.records, "max", MaxPendingUsage)
	}
	if !q.sending {
		q.sending = true
		go c.sendUsage()
	}
}

// PendingUsage returns how many usage records wait to be delivered.
func (c *Client) PendingUsage() int {
	c.usage.mu.Lock()
	defer c.usage.mu.Unlock()
	return c.usage.records
}

// FlushUsage waits until every queued usage record has been delivered or
// dropped, or ctx ends.
func (c *Client) FlushUsage(ctx context.Context) error {
	q := &c.usage
	q.mu.Lock()
	if len(q.reports) == 0 {
		q.mu.Unlock()
		return nil
	}
	if q.idle == nil {
		q.idle = make(chan struct{})
	}
	idle := q.idle
	q.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendUsage delivers the queue until it is empty.
func (c *Client) sendUsage() {
	q := &c.usage
	wait := usageRetryMin
	failures := 0
	for {
		q.mu.Lock()
		if len(q.reports) == 0 {
			q.sending = false
			if q.idle != nil {
				close(q.idle)
				q.idle = nil
			}
			q.mu.Unlock()
			return
		}
		r := q.reports[0]
		q.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), usageSendTimeout)
		err := c.ReportUsage(ctx, r.nodeID, r.recs)
		cancel()
		if err != nil && Temporary(err) {
			failures++
			if failures == 1 || failures%usageLogEveryFail == 0 {
				c.log.Warn("usage report not taken; kept to send again", "records", len(r.recs),
					"pending", c.PendingUsage(), "attempts", failures, "err", err)
			}
			d := wait
			var se *StatusError
			if errors.As(err, &se) && se.RetryAfter > d {
				d = se.RetryAfter
			}
			time.Sleep(min(d, usageRetryMax))
			wait = min(wait*2, usageRetryMax)
			continue
		}
		if err != nil {
			c.log.Error("usage report refused by the registry; dropped", "records", len(r.recs), "err", err)
		} else if failures > 0 {
			c.log.Info("usage report delivered after failures", "records", len(r.recs), "attempts", failures+1)
		}
		failures, wait = 0, usageRetryMin
		q.mu.Lock()
		// QueueUsage may have dropped the head meanwhile (over the bound);
		// remove r only if it is still there.
		if len(q.reports) > 0 && &q.reports[0].recs[0] == &r.recs[0] {
			q.reports = q.reports[1:]
			q.records -= len(r.recs)
		}
		q.mu.Unlock()
	}
}
