package api

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/fpga-faas/faas/sdk/registryapi"
)

// catalogMaxAge is how old a catalog snapshot may grow before a search
// refreshes it in the background. Changes to listings through this replica
// drop the snapshot at once; loads, scheduled prices taking effect and
// changes through other replicas show within this time.
const catalogMaxAge = 10 * time.Second

// catalogIndex holds, in memory, what a catalog search looks at of every
// listing. Computed per search in SQL (the current price, the loads of 30
// days and the facets of every listing) a search cost 200 ms of database
// time at 10,000 listings; from a snapshot it costs a pass over memory and
// one indexed query for the page's rows, which are read fresh, visibility
// checked again, so that a stale snapshot never shows what the caller may
// no longer see.
type catalogIndex struct {
	db *pgxpool.Pool

	build sync.Mutex // one load at a time

	mu         sync.Mutex
	snap       *catalogSnapshot // nil: none, or dropped by a change
	gen        uint64           // counts changes, so that a load that began before one is not kept
	refreshing bool
}

type catalogSnapshot struct {
	at   time.Time
	docs []catalogDoc
}

// catalogDoc is a listing as the catalog searches it; owner, name and
// summary are lower case.
type catalogDoc struct {
	id, ownerID, owner, name, summary string
	category, board, band             string
	perHour, loads30d                 int64
	public                            bool // published and public
	created                           time.Time
}

// changed drops the snapshot after a change to a listing.
func (x *catalogIndex) changed() {
	x.mu.Lock()
	x.snap = nil
	x.gen++
	x.mu.Unlock()
}

// get returns a snapshot: the current one, refreshed in the background when
// it is old, or a new one when there is none.
func (x *catalogIndex) get(ctx context.Context) (*catalogSnapshot, error) {
	x.mu.Lock()
	s := x.snap
	if s != nil && time.Since(s.at) > catalogMaxAge && !x.refreshing {
		x.refreshing = true
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, _ = x.reload(ctx) // on failure the old snapshot serves until the next try
			x.mu.Lock()
			x.refreshing = false
			x.mu.Unlock()
		}()
	}
	x.mu.Unlock()
	if s != nil {
		return s, nil
	}
	return x.reload(ctx)
}

// reload loads a snapshot and keeps it unless a listing changed meanwhile.
func (x *catalogIndex) reload(ctx context.Context) (*catalogSnapshot, error) {
	x.build.Lock()
	defer x.build.Unlock()
	x.mu.Lock()
	gen, s := x.gen, x.snap
	x.mu.Unlock()
	if s != nil && time.Since(s.at) <= catalogMaxAge {
		return s, nil // loaded while this caller waited
	}
	s, err := loadCatalog(ctx, x.db)
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	if x.gen == gen {
		x.snap = s
	}
	x.mu.Unlock()
	return s, nil
}

func loadCatalog(ctx context.Context, db *pgxpool.Pool) (*catalogSnapshot, error) {
	s := &catalogSnapshot{at: time.Now()}
	rows, err := db.Query(ctx, `select l.id::text, l.owner_id::text, a.name, l.name, l.summary, l.category, l.board_model,
		coalesce(cp.per_hour_micros, 0), coalesce(u.n, 0), l.published and l.visibility = 'public', l.created_at
		from listings l join accounts a on a.id = l.owner_id `+currentPrices+`
		left join (select listing_id, count(*) as n from usage_records
		           where event = 'load' and recorded_at > now() - interval '30 days' group by listing_id) u
		  on u.listing_id = l.id`)
	if err != nil {
		return nil, fmt.Errorf("catalog: load: %w", err)
	}
	var d catalogDoc
	_, err = pgx.ForEachRow(rows, []any{&d.id, &d.ownerID, &d.owner, &d.name, &d.summary, &d.category, &d.board,
		&d.perHour, &d.loads30d, &d.public, &d.created}, func() error {
		d.owner, d.name, d.summary = strings.ToLower(d.owner), strings.ToLower(d.name), strings.ToLower(d.summary)
		d.band = priceBand(d.perHour)
		s.docs = append(s.docs, d)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("catalog: load: %w", err)
	}
	return s, nil
}

func priceBand(perHour int64) string {
	for _, b := range registryapi.PriceBands {
		if perHour >= b.MinMicros && (b.MaxMicros == 0 || perHour < b.MaxMicros) {
			return b.ID
		}
	}
	return ""
}
