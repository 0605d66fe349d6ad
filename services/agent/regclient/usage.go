package regclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fpga-faas/faas/internal/atomicfile"
	"github.com/fpga-faas/faas/sdk/registryapi"
	"github.com/fpga-faas/faas/sdk/registryclient"
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
	// spool, when set (SpoolUsage), is the directory that keeps each
	// report as a file until the registry has taken it; next numbers
	// the next file.
	spool string
	next  uint64
}

type usageReport struct {
	NodeID string                    `json:"node_id"`
	Recs   []registryapi.UsageRecord `json:"records"`
	file   string                    // in the spool; "" when not spooled
	// unspoolable: writing it to the spool failed; not tried again.
	unspoolable bool
}

// spoolExt ends the name of a spooled report, spoolDigits of its number
// before it, so that names sort in the order reports were queued.
const (
	spoolExt    = ".usage.json"
	spoolDigits = 20
)

// SpoolUsage keeps usage reports in dir (created 0700 if missing) until
// the registry takes them, so that a restart of faasd loses none: the
// reports a previous run left there are queued again, in order, and sent.
// Call it once, before QueueUsage. A spooled file that cannot be read is
// left in place and reported in the error; the others are still queued.
func (c *Client) SpoolUsage(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("regclient: usage spool: %w", err)
	}
	names, err := filepath.Glob(filepath.Join(dir, "*"+spoolExt))
	if err != nil {
		return fmt.Errorf("regclient: usage spool: %w", err)
	}
	slices.Sort(names)
	q := &c.usage
	q.mu.Lock()
	defer q.mu.Unlock()
	q.spool = dir
	var errs []error
	for _, name := range names {
		if n, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(name), spoolExt), 10, 64); err == nil && n >= q.next {
			q.next = n + 1
		}
		data, err := os.ReadFile(name)
		var r usageReport
		if err == nil {
			err = json.Unmarshal(data, &r)
		}
		if err != nil || len(r.Recs) == 0 {
			errs = append(errs, fmt.Errorf("regclient: usage spool: %s: unreadable, left in place: %v", name, err))
			continue
		}
		r.file = name
		q.reports = append(q.reports, r)
		q.records += len(r.Recs)
	}
	if len(q.reports) > 0 && !q.sending {
		c.log.Info("usage reports of an earlier run queued again", "reports", len(q.reports), "records", q.records)
		q.sending = true
		go c.sendUsage()
	}
	return errors.Join(errs...)
}

// spoolPending writes every queued report not in the spool yet to it
// (when there is one). The sender calls it before each attempt, so that
// QueueUsage, on a load's path, never waits for a disk flush; what a crash
// can lose is only what was queued in the last moments, never a report
// that waits for the registry.
func (c *Client) spoolPending() {
	q := &c.usage
	type pending struct {
		key  *registryapi.UsageRecord // the report's first record: its identity
		name string
		r    usageReport
	}
	var todo []pending
	q.mu.Lock()
	if q.spool != "" {
		for _, r := range q.reports {
			if r.file == "" && !r.unspoolable {
				todo = append(todo, pending{&r.Recs[0], filepath.Join(q.spool, fmt.Sprintf("%0*d%s", spoolDigits, q.next, spoolExt)), r})
				q.next++
			}
		}
	}
	q.mu.Unlock()
	for _, p := range todo {
		data, err := json.Marshal(p.r)
		if err == nil {
			err = atomicfile.Write(p.name, data, 0o600)
		}
		if err != nil {
			// Sent from memory all the same; only a restart before then
			// would lose it.
			c.log.Error("usage report not spooled", "records", len(p.r.Recs), "err", err)
			p.name = ""
		}
		q.mu.Lock()
		i := slices.IndexFunc(q.reports, func(r usageReport) bool { return &r.Recs[0] == p.key })
		switch {
		case i >= 0:
			q.reports[i].file, q.reports[i].unspoolable = p.name, p.name == ""
		case p.name != "":
			os.Remove(p.name) // dropped meanwhile (over the bound)
		}
		q.mu.Unlock()
	}
}

// unspool removes r's file once the registry took or refused r.
func (c *Client) unspool(r usageReport) {
	if r.file == "" {
		return
	}
	if err := os.Remove(r.file); err != nil && !errors.Is(err, os.ErrNotExist) {
		c.log.Error("usage report delivered but left in the spool: it will be sent again (idempotent)", "file", r.file, "err", err)
	}
}

// QueueUsage hands usage records of node nodeID to the client and returns
// at once. A goroutine sends them (ReportUsage), one call per QueueUsage in
// order, and keeps a report the registry did not take for a reason that
// passes (registryclient.Temporary: unreachable, 5xx such as the 503 of a database that is
// out of disk space, read-only or down, 429) to send again, with backoff,
// until it is taken: report ids make the resends idempotent. A report the
// registry refuses (422: no grant backs it) is dropped and logged; sending
// it again would be refused again. The goroutine ends when the queue is
// empty. The queue lives in memory, and in the spool directory when
// SpoolUsage named one: without it, usage still queued when faasd stops
// is lost.
func (c *Client) QueueUsage(nodeID string, recs []registryapi.UsageRecord) {
	if len(recs) == 0 {
		return
	}
	q := &c.usage
	q.mu.Lock()
	defer q.mu.Unlock()
	q.reports = append(q.reports, usageReport{NodeID: nodeID, Recs: recs})
	q.records += len(recs)
	for q.records > MaxPendingUsage && len(q.reports) > 1 {
		old := q.reports[0]
		q.reports = q.reports[1:]
		q.records -= len(old.Recs)
		c.unspool(old)
		c.log.Error("usage report dropped: too many reports wait for the registry",
			"records", len(old.Recs), "pending", q.records, "max", MaxPendingUsage)
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
		c.spoolPending()
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
		_, err := c.ReportUsage(ctx, registryapi.UsageReport{NodeID: r.NodeID, Records: r.Recs})
		cancel()
		if err != nil && registryclient.Temporary(err) {
			failures++
			if failures == 1 || failures%usageLogEveryFail == 0 {
				c.log.Warn("usage report not taken; kept to send again", "records", len(r.Recs),
					"pending", c.PendingUsage(), "attempts", failures, "err", err)
			}
			d := wait
			var se *registryclient.Error
			if errors.As(err, &se) && se.RetryAfter > d {
				d = se.RetryAfter
			}
			time.Sleep(min(d, usageRetryMax))
			wait = min(wait*2, usageRetryMax)
			continue
		}
		if err != nil {
			c.log.Error("usage report refused by the registry; dropped", "records", len(r.Recs), "err", err)
		} else if failures > 0 {
			c.log.Info("usage report delivered after failures", "records", len(r.Recs), "attempts", failures+1)
		}
		failures, wait = 0, usageRetryMin
		q.mu.Lock()
		// QueueUsage may have dropped the head meanwhile (over the bound);
		// remove r only if it is still there.
		if len(q.reports) > 0 && &q.reports[0].Recs[0] == &r.Recs[0] {
			q.reports = q.reports[1:]
			q.records -= len(r.Recs)
			c.unspool(r)
		}
		q.mu.Unlock()
	}
}
