package validation

import (
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/hdk/image"
	"github.com/fpga-faas/faas/hdk/sign"
	"github.com/fpga-faas/faas/hdk/validate"
	"github.com/fpga-faas/faas/services/registry/blob"
	"github.com/fpga-faas/faas/services/registry/distribution"
	"github.com/fpga-faas/faas/services/registry/meta"
)

// Defaults for the zero values of Config.
const (
	DefaultLease       = 5 * time.Minute
	DefaultPoll        = 2 * time.Second
	DefaultBackoff     = 5 * time.Second
	DefaultMaxBackoff  = 5 * time.Minute
	DefaultJobTimeout  = 30 * time.Minute
	internalRegistry   = "registry.internal"
	signatureReasonKey = "ISV_SIGNATURE_INVALID"
)

// Codes of reasons this package adds to the hdk validation codes.
const (
	// CodeSignature: the image has no signature valid for one of its ISV's
	// registered, unrevoked signing keys.
	CodeSignature validate.Code = signatureReasonKey
	// CodeManifestMissing: the job's manifest is not in its repository.
	CodeManifestMissing validate.Code = "MANIFEST_MISSING"
	// CodeAttemptsExhausted: transient errors persisted for max_attempts runs.
	CodeAttemptsExhausted validate.Code = "ATTEMPTS_EXHAUSTED"
)

// ErrLeaseLost: the job's lease belongs to another worker now (it expired
// and was taken over); this worker's result is discarded.
var ErrLeaseLost = errors.New("validation: lease lost")

// Config configures a Worker. Pool, Meta, Blobs and Signer are required.
type Config struct {
	Pool  *pgxpool.Pool
	Meta  *meta.Store
	Blobs blob.Store
	// Signer countersigns validated images (the platform's ECDSA P-256
	// key, PlatformKeys.Signing).
	Signer crypto.Signer
	// Owner identifies this worker in lease_owner. Default: host name,
	// process id and a random suffix.
	Owner string
	// Lease is how long a claimed job stays this worker's; a job whose
	// lease expired is claimed again by any worker. Default DefaultLease.
	Lease time.Duration
	// Poll is the pause between polls when no job is runnable.
	// Default DefaultPoll.
	Poll time.Duration
	// Backoff is the delay before the first retry after a transient error;
	// it doubles per attempt up to MaxBackoff. Defaults DefaultBackoff and
	// DefaultMaxBackoff.
	Backoff, MaxBackoff time.Duration
	// Validate are the hdk validation options; FullStream is always set.
	Validate validate.Options
	// Logger receives job outcomes and errors. Default: discard.
	Logger *slog.Logger
}

// Worker runs validation jobs. Any number of Workers, in one process or
// many, may run over the same database.
type Worker struct {
	cfg    Config
	log    *slog.Logger
	remote []remote.Option
}

// Job is a claimed validation job.
type Job struct {
	ID          string
	RepoID      int64
	Repository  string
	Digest      string
	ListingID   string // "" when the job has no listing
	Attempts    int    // including this run
	MaxAttempts int
	// Parts is the FPGA part each chip of the image needs, in board
	// order, read from its config while it is checked, and Indexes the
	// chip of a board each is for (-1: either); stored with an available
	// image so that the pool places it on chips that can take it.
	Parts   []string
	Indexes []int
}

// Reason is one entry of a job's reasons: an hdk validation finding, or a
// finding of this package (CodeSignature, CodeManifestMissing,
// CodeAttemptsExhausted) with Chip -1.
type Reason = validate.Finding

// New returns a Worker over cfg.
func New(cfg Config) (*Worker, error) {
	if cfg.Pool == nil || cfg.Meta == nil || cfg.Blobs == nil || cfg.Signer == nil {
		return nil, errors.New("validation: Config needs Pool, Meta, Blobs and Signer")
	}
	if cfg.Owner == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		cfg.Owner = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultPoll
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultBackoff
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.Validate.FullStream = true
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// The registry's own storage, read and written through the OCI API
	// in process: no network, no credentials, the same code paths (and
	// digest checks) as any client. The handler is reachable only here.
	h, err := distribution.New(distribution.Config{Meta: cfg.Meta, Blobs: cfg.Blobs, Authorizer: distribution.AllowAll{}})
	if err != nil {
		return nil, fmt.Errorf("validation: %w", err)
	}
	return &Worker{
		cfg:    cfg,
		log:    cfg.Logger,
		remote: []remote.Option{remote.WithTransport(handlerTransport{h})},
	}, nil
}

// Owner returns the worker's lease owner id.
func (w *Worker) Owner() string { return w.cfg.Owner }

// Run claims and runs jobs until ctx is done, then returns nil. Errors of
// single jobs and of the database are logged and retried.
func (w *Worker) Run(ctx context.Context) error {
	for {
		ran, err := w.RunOnce(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			w.log.WarnContext(ctx, "validation job", slog.Any("err", err))
		}
		if ran && err == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(w.cfg.Poll):
		}
	}
}

// RunOnce claims one runnable job and runs it. It reports whether there was
// a job.
func (w *Worker) RunOnce(ctx context.Context) (bool, error) {
	job, err := w.Claim(ctx)
	if err != nil || job == nil {
		return false, err
	}
	return true, w.Process(ctx, job)
}

// Claim leases one runnable job — pending and due, or validating with an
// expired lease — to this worker for Config.Lease and counts the attempt.
// It returns nil, nil when there is none.
func (w *Worker) Claim(ctx context.Context) (*Job, error) {
	var j Job
	var listing *string
	err := w.cfg.Pool.QueryRow(ctx, `update validation_jobs j
		set state = 'validating', lease_owner = $1, lease_until = now() + make_interval(secs => $2),
			attempts = j.attempts + 1, updated_at = now()
		from repositories r
		where r.id = j.repository_id and j.id = (
			select id from validation_jobs
			where (state = 'pending' and run_after <= now())
			   or (state = 'validating' and lease_until < now())
			order by run_after, created_at
			limit 1 for update skip locked)
		returning j.id::text, j.repository_id, r.name, j.manifest_digest, j.listing_id::text, j.attempts, j.max_attempts`,
		w.cfg.Owner, w.cfg.Lease.Seconds()).Scan(&j.ID, &j.RepoID, &j.Repository, &j.Digest, &listing, &j.Attempts, &j.MaxAttempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("validation: claiming a job: %w", err)
	}
	if listing != nil {
		j.ListingID = *listing
	}
	return &j, nil
}

// transientError marks a failure of the registry's own storage (database,
// blob store): the job is retried.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// Process runs a claimed job to its outcome: available (validated, ISV
// signature verified, countersigned), failed (with reasons), or back to
// pending with a backoff after a transient error. It returns ErrLeaseLost
// when the job was taken over meanwhile; the job's effects are idempotent,
// so the other worker's run is unharmed.
func (w *Worker) Process(ctx context.Context, j *Job) error {
	log := w.log.With(slog.String("job", j.ID), slog.String("repository", j.Repository), slog.String("digest", j.Digest))
	if j.Attempts > j.MaxAttempts {
		return w.finish(ctx, j, "failed", []Reason{{Code: CodeAttemptsExhausted, Severity: validate.SeverityError, Chip: -1,
			Message: fmt.Sprintf("gave up after %d attempts", j.MaxAttempts)}})
	}
	// The lease is renewed while the job runs, so that a slow job is not
	// taken over and run twice (two countersignature pushes); once it
	// cannot be renewed, the job stops.
	jctx, stop := w.keepLease(ctx, j)
	reasons, err := w.check(jctx, j)
	lost := stop()
	if lost != nil {
		log.WarnContext(ctx, "validation: lease lost", slog.Any("err", lost))
		return lost
	}
	if err != nil {
		var te transientError
		if !errors.As(err, &te) && ctx.Err() == nil {
			return err
		}
		log.WarnContext(ctx, "validation: transient error", slog.Int("attempt", j.Attempts), slog.Any("err", err))
		if ctx.Err() != nil {
			// Shutting down: leave the lease to expire (or release it
			// on a fresh context).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return w.retry(rctx, j, err)
		}
		return w.retry(ctx, j, err)
	}
	state := "available"
	if len(reasons) > 0 {
		state = "failed"
	}
	if err := w.finish(ctx, j, state, reasons); err != nil {
		return err
	}
	log.InfoContext(ctx, "validation: done", slog.String("state", state), slog.Int("reasons", len(reasons)))
	return nil
}

// keepLease renews j's lease every third of Config.Lease until stop is
// called. The returned context ends when the lease is lost; stop returns
// an error wrapping ErrLeaseLost then.
func (w *Worker) keepLease(ctx context.Context, j *Job) (context.Context, func() error) {
	jctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(w.cfg.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-jctx.Done():
				return
			case <-t.C:
			}
			tag, err := w.cfg.Pool.Exec(jctx, `update validation_jobs
				set lease_until = now() + make_interval(secs => $3), updated_at = now()
				where id = $1 and lease_owner = $2 and state = 'validating'`, j.ID, w.cfg.Owner, w.cfg.Lease.Seconds())
			switch {
			case err != nil && jctx.Err() == nil:
				// The database is unreachable: the lease runs out on its
				// own; keep trying until then.
				continue
			case err == nil && tag.RowsAffected() == 0:
				cancel(fmt.Errorf("%w: job %s", ErrLeaseLost, j.ID))
				return
			}
		}
	}()
	return jctx, func() error {
		close(done)
		<-ended
		err := context.Cause(jctx)
		cancel(nil)
		if errors.Is(err, ErrLeaseLost) {
			return err
		}
		return nil
	}
}

// check validates the image, verifies the ISV signature and countersigns.
// It returns the reasons of a failed image, or an error (a transientError
// when the storage failed).
func (w *Worker) check(ctx context.Context, j *Job) ([]Reason, error) {
	ref, err := name.NewDigest(internalRegistry + "/" + j.Repository + "@" + j.Digest)
	if err != nil {
		return []Reason{{Code: CodeManifestMissing, Severity: validate.SeverityError, Chip: -1,
			Message: fmt.Sprintf("invalid reference: %v", err)}}, nil
	}
	opts := append(w.remote[:len(w.remote):len(w.remote)], remote.WithContext(ctx))
	img, err := remote.Image(ref, opts...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return []Reason{{Code: CodeManifestMissing, Severity: validate.SeverityError, Chip: -1,
				Message: "the manifest is not in the repository"}}, nil
		}
		return nil, transientError{fmt.Errorf("validation: reading %s: %w", ref, err)}
	}
	report := validate.Image(ctx, img, w.cfg.Validate)
	if report.OK() {
		// The config was read and checked by validate.Image; an error
		// here is the storage's.
		cfg, err := image.ConfigOf(img)
		if err != nil {
			return nil, transientError{fmt.Errorf("validation: config of %s: %w", ref, err)}
		}
		j.Parts, j.Indexes = chipsOf(cfg)
	}
	if !report.OK() {
		// A finding may stem from storage that failed while it was read.
		if err := w.storageHealthy(ctx); err != nil {
			return nil, transientError{err}
		}
		var out []Reason
		for _, f := range report.Findings {
			if f.Severity == validate.SeverityError {
				out = append(out, f)
			}
		}
		return out, nil
	}

	keys, err := w.isvKeys(ctx, j)
	if err != nil {
		return nil, transientError{err}
	}
	if len(keys) == 0 {
		return []Reason{{Code: CodeSignature, Severity: validate.SeverityError, Chip: -1,
			Message: "no valid ISV signature: the ISV has no registered, unrevoked signing key"}}, nil
	}
	signOpts := []sign.Option{sign.WithRemoteOptions(opts...)}
	if _, err := sign.Verify(ctx, ref, keys, signOpts...); err != nil {
		if errors.Is(err, sign.ErrNoSignature) || errors.Is(err, sign.ErrBadSignature) {
			return []Reason{{Code: CodeSignature, Severity: validate.SeverityError, Chip: -1,
				Message: "no valid ISV signature: " + err.Error()}}, nil
		}
		return nil, transientError{err}
	}
	// Idempotent: a signature of the same payload by the same key is not
	// added twice (a rerun after a crash finds it there).
	if err := sign.Sign(ctx, ref, w.cfg.Signer, append(signOpts, sign.WithIdentity(j.Repository))...); err != nil {
		return nil, transientError{fmt.Errorf("validation: countersigning: %w", err)}
	}
	return nil, nil
}

// chipsOf is the part each chip of an image needs and the chip of a board
// it is for (-1: either), in board order: the chip of index 0 (or "any")
// first, then index 1.
func chipsOf(cfg image.Config) (parts []string, indexes []int) {
	chips := slices.Clone(cfg.Chips)
	slices.SortStableFunc(chips, func(a, b image.Chip) int { return cmp.Compare(max(a.Index, 0), max(b.Index, 0)) })
	for _, c := range chips {
		parts = append(parts, c.Part)
		indexes = append(indexes, int(c.Index))
	}
	return parts, indexes
}

// storageHealthy checks that the database and the blob store answer.
func (w *Worker) storageHealthy(ctx context.Context) error {
	if err := w.cfg.Pool.Ping(ctx); err != nil {
		return fmt.Errorf("validation: database: %w", err)
	}
	_, err := w.cfg.Blobs.Stat(ctx, blob.FromBytes([]byte("faas-registry validation probe")))
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		return fmt.Errorf("validation: blob store: %w", err)
	}
	return nil
}

// isvKeys returns the registered, unrevoked signing keys of the image's
// ISV: the listing's owner, else the repository's owner, else the isv
// account named like the repository's namespace.
func (w *Worker) isvKeys(ctx context.Context, j *Job) ([]crypto.PublicKey, error) {
	rows, err := w.cfg.Pool.Query(ctx, `select k.public_key from signing_keys k
		where k.revoked_at is null and k.account_id = coalesce(
			(select owner_id from listings where id = nullif($1, '')::uuid),
			(select owner_id from repositories where id = $2),
			(select id from accounts where role = 'isv' and name = split_part($3, '/', 1)))
		order by k.created_at`, j.ListingID, j.RepoID, j.Repository)
	if err != nil {
		return nil, fmt.Errorf("validation: signing keys: %w", err)
	}
	pems, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("validation: signing keys: %w", err)
	}
	var keys []crypto.PublicKey
	for _, p := range pems {
		k, err := sign.LoadPublicKey([]byte(p))
		if err != nil {
			w.log.WarnContext(ctx, "validation: unusable signing key", slog.Any("err", err))
			continue
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// finish completes the job if this worker still holds its lease.
func (w *Worker) finish(ctx context.Context, j *Job, state string, reasons []Reason) error {
	if reasons == nil {
		reasons = []Reason{}
	}
	b, err := json.Marshal(reasons)
	if err != nil {
		return fmt.Errorf("validation: reasons: %w", err)
	}
	parts, indexes := j.Parts, j.Indexes
	if state != "available" || parts == nil {
		parts, indexes = []string{}, []int{}
	}
	// The ISV's validation.finished event is written by the same statement,
	// so that it exists exactly when the outcome does (package webhooks);
	// the ISV is found as isvKeys finds it.
	var n int
	err = w.cfg.Pool.QueryRow(ctx, `with j as (update validation_jobs
			set state = $3, reasons = $4, parts = $5, chip_indexes = $6, lease_owner = null, lease_until = null,
				finished_at = now(), updated_at = now()
			where id = $1 and lease_owner = $2 and state = 'validating'
			returning id, repository_id, manifest_digest, listing_id, state),
		isv as (select coalesce((select owner_id from listings where id = j.listing_id), r.owner_id,
				(select id from accounts where role = 'isv' and name = split_part(r.name, '/', 1))) as id,
				r.name, j.id as job_id, j.manifest_digest, j.listing_id, j.state
			from j join repositories r on r.id = j.repository_id),
		ev as (insert into events (account_id, type, data)
			select isv.id, 'validation.finished', jsonb_build_object('job_id', isv.job_id, 'repository', isv.name,
				'digest', isv.manifest_digest, 'listing_id', isv.listing_id, 'state', isv.state, 'reasons', $7::int)
			from isv where isv.id is not null)
		select count(*) from j`, j.ID, w.cfg.Owner, state, b, parts, indexes, len(reasons)).Scan(&n)
	if err != nil {
		return fmt.Errorf("validation: completing job %s: %w", j.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: job %s", ErrLeaseLost, j.ID)
	}
	return nil
}

// retry puts the job back to pending after a transient error, with an
// exponential backoff, or fails it once its attempts are used up.
func (w *Worker) retry(ctx context.Context, j *Job, cause error) error {
	if j.Attempts >= j.MaxAttempts {
		return w.finish(ctx, j, "failed", []Reason{{Code: CodeAttemptsExhausted, Severity: validate.SeverityError, Chip: -1,
			Message: fmt.Sprintf("gave up after %d attempts; last error: %v", j.Attempts, cause)}})
	}
	delay := w.cfg.Backoff
	for i := 1; i < j.Attempts && delay < w.cfg.MaxBackoff; i++ {
		delay *= 2
	}
	delay = min(delay, w.cfg.MaxBackoff)
	tag, err := w.cfg.Pool.Exec(ctx, `update validation_jobs
		set state = 'pending', lease_owner = null, lease_until = null,
			run_after = now() + make_interval(secs => $3), updated_at = now()
		where id = $1 and lease_owner = $2 and state = 'validating'`, j.ID, w.cfg.Owner, delay.Seconds())
	if err != nil {
		return fmt.Errorf("validation: rescheduling job %s: %w", j.ID, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: job %s", ErrLeaseLost, j.ID)
	}
	return nil
}
