package registryapi

// Page is one page of a list answer. NextCursor, when set, is the ?cursor=
// of the next page; an empty one means this page is the last.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// Items is a list answer that is never paged (the caller's current loads).
type Items[T any] struct {
	Items []T `json:"items"`
}

// Limits of list pages (?limit=).
const (
	DefaultLimit = 50
	MaxLimit     = 200
)
