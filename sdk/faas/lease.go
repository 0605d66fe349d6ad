package faas

// The lease of an attachment: renewed in the background, and what happens
// when it is lost.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fpga-faas/faas/sdk/poolapi"
)

// Renew extends the lease once; an ended attachment is ErrLeaseLost.
func (a *Attachment) Renew(ctx context.Context) error {
	next, err := a.reg.Renew(ctx, a.id)
	if err != nil {
		return registryErr(err)
	}
	a.mu.Lock()
	a.info = next
	a.mu.Unlock()
	return nil
}

// renew renews the lease every third of it until ctx ends; when the
// attachment has ended, or the lease would have run out while the
// registry did not answer, the attachment is lost.
func (a *Attachment) renew(ctx context.Context) {
	defer close(a.renewDone)
	info := a.Info()
	lease := time.Duration(info.LeaseSeconds) * time.Second
	if lease <= 0 {
		lease = poolapi.DefaultLeaseSeconds * time.Second
	}
	expires := info.LeaseExpiresAt
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(lease / 3):
		}
		rctx, cancel := context.WithTimeout(ctx, lease/3)
		err := a.Renew(rctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil:
			expires = a.Info().LeaseExpiresAt
		case errors.Is(err, ErrLeaseLost):
			a.markLost(a.endedErr(ctx, err))
			return
		case errors.Is(err, ErrSpendLimit) && time.Now().After(expires):
			// Refused at the tenant's spend limit: the attachment ran to the
			// end of the lease it had.
			a.markLost(fmt.Errorf("%w: attachment %s: the lease ran out, not renewed at your spend limit: %w", ErrLeaseLost, a.id, err))
			return
		case time.Now().After(expires):
			a.markLost(fmt.Errorf("%w: attachment %s: the lease ran out while the registry could not be reached: %w", ErrLeaseLost, a.id, err))
			return
		}
	}
}

// endedErr says why the attachment ended, from the registry's account.
func (a *Attachment) endedErr(ctx context.Context, renewErr error) error {
	info, err := a.reg.Attachment(ctx, a.id, "", 0)
	if err != nil {
		return renewErr
	}
	a.mu.Lock()
	a.info = info
	a.mu.Unlock()
	switch info.State {
	case poolapi.Lost:
		return fmt.Errorf("%w: attachment %s: node %s lost", ErrLeaseLost, info.ID, info.Node)
	case poolapi.Expired:
		return fmt.Errorf("%w: attachment %s: the lease expired", ErrLeaseLost, info.ID)
	}
	return fmt.Errorf("%w: attachment %s is %s", ErrLeaseLost, info.ID, info.State)
}

// markLost ends the attachment on this side with err: the device's calls
// fail with it. Lost closes only after the device has taken err, so that
// a caller woken by Lost meets err, not the cut connection the node made
// first.
func (a *Attachment) markLost(err error) {
	a.mu.Lock()
	first := a.err == nil
	if first {
		a.err = err
	}
	a.mu.Unlock()
	if !first {
		return
	}
	if a.dev != nil {
		a.dev.endWith(err)
	}
	close(a.lost)
}
