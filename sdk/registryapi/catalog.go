package registryapi

// Catalog is the answer of GET /catalog: one page of the listings a
// search finds, in the order asked for, with the number found and, per
// facet, how many of them each value would leave.
//
// Query parameters: q (words, each found in the vendor's name, the
// listing's name or its summary, at most MaxCatalogWords words and
// MaxCatalogQuery bytes), category and board (repeatable: any of the
// values), owner (one vendor's listings: the ISV's account name), price
// (repeatable: any of the PriceBands' IDs), sort (one of
// the CatalogSorts; relevance by default when there is a q, popular
// otherwise), offset (at most MaxCatalogOffset) and limit (at most
// MaxLimit).
type Catalog struct {
	Items  []CatalogItem `json:"items"`
	Total  int           `json:"total"`
	Offset int           `json:"offset"`
	Limit  int           `json:"limit"`
	Sort   string        `json:"sort"`
	Facets CatalogFacets `json:"facets"`
}

// CatalogItem is a listing as the catalog shows it.
type CatalogItem struct {
	Listing
	// Loads30d: loads of the listing's images in the last 30 days, what
	// the popular order counts.
	Loads30d int64 `json:"loads_30d"`
	// VendorVerified: the vendor is a verified publisher, one with a
	// signing key registered and not revoked and a version of one of its
	// listings that passed validation, which needs a signature by such a
	// key.
	VendorVerified bool `json:"vendor_verified"`
}

// CatalogFacets counts, for each value of a facet, the listings the search
// finds with the other facets' filters applied but not this facet's, so
// that a value's count is what choosing it (alone) would leave.
type CatalogFacets struct {
	Category []FacetValue `json:"category"`
	Board    []FacetValue `json:"board"`
	Price    []FacetValue `json:"price"`
}

// FacetValue is one value of a facet and how many listings have it.
type FacetValue struct {
	Value    string `json:"value"`
	Count    int    `json:"count"`
	Selected bool   `json:"selected"`
}

// Bounds of a catalog search.
const (
	MaxCatalogQuery  = 128
	MaxCatalogWords  = 8
	MaxCatalogOffset = 1000
	// MaxFacetValues bounds the values of each facet asked for and, for
	// boards (which ISVs name freely), the values counted.
	MaxFacetValues = 20
)

// Categories are the catalog's categories, the only values of a
// listing's category (the database checks it too). The API takes them in
// any case and with surrounding space, and "" as "other".
var Categories = []string{"ml", "vision", "video", "audio", "networking", "storage", "database",
	"compression", "crypto", "genomics", "finance", "hpc", "other"}

// CatalogSorts are the orders of the catalog: by how well a listing
// matches q (without q, the popular order), by loads in the last 30 days,
// newest first, or cheapest per hour first.
var CatalogSorts = []string{"relevance", "popular", "newest", "price"}

// PriceBand is a range of prices per hour in micro-units of a listing's
// currency, [MinMicros, MaxMicros); MaxMicros 0 is unbounded.
type PriceBand struct {
	ID                   string
	MinMicros, MaxMicros int64
}

// PriceBands are the catalog's price facet's values.
var PriceBands = []PriceBand{
	{"free", 0, 1},
	{"under-1", 1, 1_000_000},
	{"1-10", 1_000_000, 10_000_000},
	{"10-100", 10_000_000, 100_000_000},
	{"over-100", 100_000_000, 0},
}
