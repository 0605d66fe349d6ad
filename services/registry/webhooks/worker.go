package webhooks

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Config's zero values.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultBackoff     = 10 * time.Minute // doubled per attempt: 10 min … 10 h 40 min, about 21 h over 8 attempts
	DefaultMaxBackoff  = 12 * time.Hour
	DefaultMaxAttempts = 8
	DefaultLease       = time.Minute
	DefaultPoll        = 2 * time.Second
	DefaultConcurrency = 4
	DefaultScan        = time.Hour
	DefaultExpiry      = 7 * 24 * time.Hour
	DefaultRetention   = 90 * 24 * time.Hour
	// maxResponseRead is how much of an answer's body is read, so that
	// the connection can be reused; the rest is dropped unread.
	maxResponseRead = 4 << 10
	maxErrorLen     = 512
	userAgent       = "faas-webhooks/1"
)

// Config configures a Worker; Pool is required.
type Config struct {
	Pool *pgxpool.Pool
	// AllowLoopback admits loopback addresses (and plain http to them):
	// for tests and development only.
	AllowLoopback bool
	// Timeout bounds one attempt, connection to answer. Default
	// DefaultTimeout.
	Timeout time.Duration
	// Backoff is the delay after the first failed attempt, doubled after
	// each further one up to MaxBackoff, with ±20% jitter so that a
	// receiver that was down is not hit by every retry at once.
	Backoff, MaxBackoff time.Duration
	// MaxAttempts is how many attempts a delivery gets before it is
	// failed. Default DefaultMaxAttempts.
	MaxAttempts int
	// Lease is how long a claimed delivery stays this worker's. Default
	// DefaultLease; never less than 2 × Timeout.
	Lease time.Duration
	// Poll is the pause when no delivery is due. Default DefaultPoll.
	Poll time.Duration
	// Concurrency is how many deliveries this worker sends at once, so
	// that one slow receiver does not hold up the others.
	Concurrency int
	// ScanInterval is how often API tokens are scanned for expiry and
	// old events deleted; ExpiryNotice how long before a token expires
	// its owner is told; Retention how long events are kept.
	ScanInterval, ExpiryNotice, Retention time.Duration
	// Owner identifies this worker in lease_owner. Default: host, process
	// id and a random suffix.
	Owner  string
	Logger *slog.Logger
}

// Worker delivers webhooks. Any number may run over one database.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	client *http.Client
}

// New returns a Worker over cfg with its defaults filled in.
func New(cfg Config) (*Worker, error) {
	if cfg.Pool == nil {
		return nil, errors.New("webhooks: Config.Pool is required")
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.Timeout, DefaultTimeout)
	def(&cfg.Backoff, DefaultBackoff)
	def(&cfg.MaxBackoff, DefaultMaxBackoff)
	def(&cfg.Lease, DefaultLease)
	// A lease shorter than an attempt would let another replica send the
	// same attempt while this one is still waiting for its answer.
	cfg.Lease = max(cfg.Lease, 2*cfg.Timeout)
	def(&cfg.Poll, DefaultPoll)
	def(&cfg.ScanInterval, DefaultScan)
	def(&cfg.ExpiryNotice, DefaultExpiry)
	def(&cfg.Retention, DefaultRetention)
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Worker{cfg: cfg, log: cfg.Logger, client: newClient(cfg.Timeout, cfg.AllowLoopback)}, nil
}

// Run delivers until ctx ends, with Config.Concurrency senders, and runs
// the token scan every Config.ScanInterval, the first time now.
func (w *Worker) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range w.cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.send(ctx)
		}()
	}
	t := time.NewTicker(w.cfg.ScanInterval)
	defer t.Stop()
	for {
		if err := w.Scan(ctx); err != nil && ctx.Err() == nil {
			w.log.WarnContext(ctx, "webhooks: scan", "err", err)
		}
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C:
		}
	}
}

func (w *Worker) send(ctx context.Context) {
	for ctx.Err() == nil {
		ran, err := w.RunOnce(ctx)
		if err != nil && ctx.Err() == nil {
			w.log.WarnContext(ctx, "webhooks: delivery", "err", err)
		}
		if ran && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(w.cfg.Poll):
		}
	}
}

// delivery is a claimed delivery with what it sends.
type delivery struct {
	id, url, secret string
	attempt         int
	event           Event
}

// Event is the JSON body of a delivery.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	Data      json.RawMessage `json:"data"`
}

// RunOnce claims one due delivery and makes one attempt of it; it
// reports whether there was one.
func (w *Worker) RunOnce(ctx context.Context) (bool, error) {
	var d delivery
	err := w.cfg.Pool.QueryRow(ctx, `update webhook_deliveries d
		set state = 'delivering', lease_owner = $1, lease_until = now() + make_interval(secs => $2),
			attempts = d.attempts + 1, updated_at = now()
		from webhooks w, events e
		where w.id = d.webhook_id and e.id = d.event_id and d.id = (
			select x.id from webhook_deliveries x join webhooks y on y.id = x.webhook_id
			where y.active and ((x.state = 'pending' and x.next_attempt_at <= now())
				or (x.state = 'delivering' and x.lease_until < now()))
			order by x.next_attempt_at limit 1 for update of x skip locked)
		returning d.id::text, d.attempts, w.url, w.secret, e.id::text, e.type, e.created_at, e.data`,
		w.cfg.Owner, w.cfg.Lease.Seconds()).Scan(&d.id, &d.attempt, &d.url, &d.secret,
		&d.event.ID, &d.event.Type, &d.event.CreatedAt, &d.event.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("webhooks: claiming a delivery: %w", err)
	}
	if d.attempt > w.cfg.MaxAttempts { // a lease that expired on the last attempt
		return true, w.record(ctx, d, outcome{err: "attempts exhausted"})
	}
	o := w.attempt(ctx, d)
	if ctx.Err() != nil {
		return true, w.release(context.WithoutCancel(ctx), d)
	}
	return true, w.record(ctx, d, o)
}

// release hands back a delivery whose attempt the worker's shutdown cut
// short, uncounted, so that another replica sends it at once instead of
// after the lease.
func (w *Worker) release(ctx context.Context, d delivery) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err := w.cfg.Pool.Exec(ctx, `update webhook_deliveries set state = 'pending', attempts = attempts - 1,
		lease_owner = null, lease_until = null, next_attempt_at = now(), updated_at = now()
		where id = $1::uuid and lease_owner = $2 and state = 'delivering'`, d.id, w.cfg.Owner)
	if err != nil {
		return fmt.Errorf("webhooks: releasing delivery %s: %w", d.id, err)
	}
	return nil
}

// outcome is one attempt's result.
type outcome struct {
	status   int // 0: no answer
	duration time.Duration
	err      string
}

func (o outcome) ok() bool { return o.status >= 200 && o.status < 300 }

// attempt POSTs the event once.
func (w *Worker) attempt(ctx context.Context, d delivery) outcome {
	d.event.CreatedAt = d.event.CreatedAt.UTC()
	body, err := json.Marshal(d.event)
	if err != nil {
		return outcome{err: "encoding the event: " + err.Error()}
	}
	rctx, cancel := context.WithTimeout(ctx, w.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return outcome{err: "the URL is unusable"}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Faas-Event", d.event.Type)
	req.Header.Set("Faas-Event-Id", d.event.ID)
	req.Header.Set("Faas-Delivery", d.id)
	req.Header.Set(SignatureHeader, Sign(d.secret, time.Now(), body))
	start := time.Now()
	resp, err := w.client.Do(req)
	o := outcome{duration: time.Since(start)}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // the URL is the account's own; not repeated in the log
			err = ue.Err
		}
		o.err = err.Error()
		return o
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	_ = resp.Body.Close()
	o.status = resp.StatusCode
	if !o.ok() {
		o.err = resp.Status
	}
	return o
}

// record logs the attempt and schedules what follows: done, a retry, or
// failed once the attempts are spent. A worker whose lease was taken over
// logs the attempt but leaves the delivery to the new holder.
func (w *Worker) record(ctx context.Context, d delivery, o outcome) error {
	state, delay := "succeeded", time.Duration(0)
	switch {
	case o.ok():
	case d.attempt >= w.cfg.MaxAttempts:
		state = "failed"
	default:
		state, delay = "pending", w.backoff(d.attempt)
	}
	o.err = errorText(o.err)
	var status *int
	if o.status != 0 {
		status = &o.status
	}
	ms := o.duration.Milliseconds()
	_, err := w.cfg.Pool.Exec(ctx, `with a as (
			insert into webhook_attempts (delivery_id, attempt, status_code, duration_ms, error)
			values ($1::uuid, $3, $4, $5, $6) on conflict do nothing)
		update webhook_deliveries set state = $7, next_attempt_at = now() + make_interval(secs => $8),
			lease_owner = null, lease_until = null, status_code = $4, duration_ms = $5, error = $6, updated_at = now()
		where id = $1::uuid and lease_owner = $2 and state = 'delivering'`,
		d.id, w.cfg.Owner, d.attempt, status, ms, o.err, state, delay.Seconds())
	if err != nil {
		return fmt.Errorf("webhooks: recording delivery %s: %w", d.id, err)
	}
	return nil
}

// backoff is the delay after the attempt-th failed attempt.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.cfg.Backoff
	for i := 1; i < attempt && d < w.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, w.cfg.MaxBackoff)
	// ±20%: a uniform draw in [0.8 d, 1.2 d).
	n, err := rand.Int(rand.Reader, big.NewInt(int64(d)*2/5+1))
	if err != nil {
		return d
	}
	return d*4/5 + time.Duration(n.Int64())
}

// errorText is s fit for the delivery log: the text may come from the
// receiver (its status line), PostgreSQL takes only valid UTF-8, and the
// log keeps maxErrorLen bytes without cutting a rune.
func errorText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for len(s) > maxErrorLen {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	return s
}
