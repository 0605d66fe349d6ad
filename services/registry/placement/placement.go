// Package placement chooses where the accelerator pool puts an attachment: a
// node and a slot, from what the nodes' heartbeats say and what live
// attachments already hold (docs/ARCHITECTURE.md, "Attach"). It is pure:
// the caller reads the state under a lock and writes the choice in the
// same transaction.
//
// Only chips of the part an image was built for, and for a one-chip image
// the chip of a board its bitstream is for, are considered: a bitstream
// for one part, or for the other chip, fails to load there, so placing it
// there would only move the failure to the node. Nodes the caller excludes (where
// an earlier attempt failed) are not considered either.
//
// The rules, in order of preference:
//
//   - A share goes to a chip already running the image with a tenant
//     window left (the fewest shares first), so that no load is needed;
//     else to a free chip, which is then loaded. A chip that live shares
//     of the image were placed on runs it as far as placement is
//     concerned, whatever the last heartbeat said: the registry's own
//     records are newer than any heartbeat, so a second share need not
//     wait for the node to report the first.
//   - A whole attachment goes warm when it can: to a chip (or board) still
//     holding the image for the same tenant after a detach, so that no
//     load is needed.
//   - Otherwise to free chips: a free chip for a one-chip image, a board
//     with both chips free for a two-chip one, on the node with the most
//     free chips (spreading attachments across nodes), then the node with
//     the fewest live attachments, then by id so that the choice is
//     deterministic.
package placement

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrNoCapacity is returned, wrapped with what was wanted (Wanted), when
// no node can take the attachment.
var ErrNoCapacity = errors.New("placement: no node has room")

// Slot states as heartbeats report them (agentapi's slot states).
const (
	Cleared = "cleared"
	Loaded  = "loaded"
	Busy    = "busy"
)

// Slot is one chip of a node as its last heartbeat reported it.
type Slot struct {
	Index int
	// Chip is the chip's place on its board: 0 or 1.
	Chip   int
	State  string
	Digest string // the loaded image, if any
	// Part is the chip's FPGA part (shell.Part.Name); "" when the node's
	// board model is unknown to the registry, which then takes only
	// images that name no part.
	Part string
}

// Node is a node that may take attachments (trusted, reachable, heartbeating).
type Node struct {
	ID string
	// Boards are the node's boards, each with its chips' slots in order.
	Boards [][]Slot
	// Held are the slots live whole attachments hold.
	Held map[int]bool
	// Shares counts the live share attachments per slot.
	Shares map[int]int
	// ShareDigest is the image the live shares of a slot run, from the
	// registry's records of attachments (heartbeats may not show it yet).
	ShareDigest map[int]string
	// Live counts the node's live attachments.
	Live int
	// Warm maps a slot kept loaded after a detach to the tenant it was
	// kept for.
	Warm map[int]string
}

// Request is what the attachment needs.
type Request struct {
	TenantID string
	Digest   string
	// Chips is how many chips the image takes: 1 or 2 (a whole board).
	Chips int
	Share bool
	// MaxShares is how many share attachments one chip takes (its tenant
	// windows).
	MaxShares int
	// Parts is the part each chip of the image needs, in board order
	// (Parts[0] for the board's first chip); nil or "" is any part: an
	// image whose part the registry does not know.
	Parts []string
	// Indexes is the chip of a board each chip of the image is for, in
	// the same order; missing or -1 is either chip.
	Indexes []int
	// Exclude are nodes not to place on (an earlier attempt failed there).
	Exclude []string
}

// part is the part chip i of the image needs, "" for any.
func (r Request) part(i int) string {
	if i < len(r.Parts) {
		return r.Parts[i]
	}
	return ""
}

// index is the chip of a board chip i of the image is for, -1 for either.
func (r Request) index(i int) int {
	if i < len(r.Indexes) {
		return r.Indexes[i]
	}
	return -1
}

// fits reports whether s can take chip i of the image: of its part, and
// the chip of the board its bitstream is for.
func (r Request) fits(s Slot, i int) bool {
	p, x := r.part(i), r.index(i)
	return (p == "" || s.Part == p) && (x < 0 || s.Chip == x)
}

// Wanted says what req needs, for an error: "a free <part> chip", "a
// free <part> chip 1 of a board", "a board of two free <part> chips", or
// "room" when neither part nor chip is known.
func Wanted(req Request) string {
	var parts []string
	for i := range max(req.Chips, 1) {
		if p := req.part(i); p != "" && !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	if req.Chips == 2 {
		if len(parts) == 0 {
			return "room"
		}
		return "a board of two free " + strings.Join(parts, " and ") + " chips"
	}
	chip := "chip"
	if len(parts) > 0 {
		chip = parts[0] + " chip"
	}
	if x := req.index(0); x >= 0 {
		chip += fmt.Sprintf(" %d of a board", x)
	} else if len(parts) == 0 {
		return "room"
	}
	if req.Share {
		return "a " + chip + " with a tenant window free"
	}
	return "a free " + chip
}

// Choice is where the attachment goes.
type Choice struct {
	NodeID string
	// Slot is the slot to open sessions on; for two chips, the board's
	// first.
	Slot int
	// Warm: the slot already holds the image, so that no load is needed.
	Warm bool
}

// Place chooses a node and slot for req among nodes.
func Place(nodes []Node, req Request) (Choice, error) {
	if req.Chips < 1 || req.Chips > 2 {
		return Choice{}, fmt.Errorf("placement: an image of %d chips", req.Chips)
	}
	if req.Share && req.Chips != 1 {
		return Choice{}, errors.New("placement: a two-chip image cannot be shared")
	}
	if len(req.Exclude) > 0 {
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(n Node) bool { return slices.Contains(req.Exclude, n.ID) })
	}
	if req.Share {
		if c, ok := shared(nodes, req); ok {
			return c, nil
		}
	} else if c, ok := warm(nodes, req); ok {
		return c, nil
	}
	if c, ok := free(nodes, req); ok {
		return c, nil
	}
	return Choice{}, fmt.Errorf("%w: no node in the pool has %s", ErrNoCapacity, Wanted(req))
}

// running reports whether s runs digest.
func running(s Slot, digest string) bool {
	return (s.State == Loaded || s.State == Busy) && s.Digest == digest
}

func shared(nodes []Node, req Request) (Choice, bool) {
	best, bestShares, bestLive := Choice{}, -1, 0
	for _, n := range nodes {
		for _, b := range n.Boards {
			for _, s := range b {
				k := n.Shares[s.Index]
				recorded := n.ShareDigest[s.Index]
				// The records win over the heartbeat: a chip given to
				// shares of another image is not this image's, and one
				// given to shares of this image is, loaded or not yet.
				runs := (running(s, req.Digest) && recorded == "") || (recorded == req.Digest && k > 0)
				if !runs || n.Held[s.Index] || k >= req.MaxShares || !req.fits(s, 0) {
					continue
				}
				if bestShares < 0 || k < bestShares || (k == bestShares && n.Live < bestLive) {
					// Warm only when the node reports the image loaded;
					// a share joining a chip still loading waits for it.
					best, bestShares, bestLive = Choice{NodeID: n.ID, Slot: s.Index, Warm: running(s, req.Digest)}, k, n.Live
				}
			}
		}
	}
	return best, bestShares >= 0
}

func warm(nodes []Node, req Request) (Choice, bool) {
	for _, n := range sorted(nodes, req) {
		for _, b := range n.Boards {
			for _, set := range sets(b, req.Chips) {
				ok := true
				for i, s := range set {
					ok = ok && running(s, req.Digest) && !n.Held[s.Index] && n.Shares[s.Index] == 0 && n.Warm[s.Index] == req.TenantID && req.fits(s, i)
				}
				if ok {
					return Choice{NodeID: n.ID, Slot: set[0].Index, Warm: true}, true
				}
			}
		}
	}
	return Choice{}, false
}

func free(nodes []Node, req Request) (Choice, bool) {
	for _, n := range sorted(nodes, req) {
		for _, b := range n.Boards {
			for _, set := range sets(b, req.Chips) {
				ok := true
				for i, s := range set {
					ok = ok && isFree(n, s) && req.fits(s, i)
				}
				if ok {
					return Choice{NodeID: n.ID, Slot: set[0].Index}, true
				}
			}
		}
	}
	return Choice{}, false
}

// isFree reports whether s is free: cleared (a slot kept warm is loaded,
// so never free) and held by no attachment the heartbeat may not show yet.
func isFree(n Node, s Slot) bool {
	return s.State == Cleared && !n.Held[s.Index] && n.Shares[s.Index] == 0
}

// sets are the slot sets of a board an image of chips takes: each chip
// alone, or the whole board.
func sets(board []Slot, chips int) [][]Slot {
	if chips == 2 {
		if len(board) != 2 {
			return nil
		}
		return [][]Slot{board}
	}
	out := make([][]Slot, len(board))
	for i := range board {
		out[i] = board[i : i+1]
	}
	return out
}

// sorted orders nodes by most free chips of the part req needs, then
// fewest live attachments, then id.
func sorted(nodes []Node, req Request) []Node {
	out := slices.Clone(nodes)
	freeChips := func(n Node) int {
		k := 0
		for _, b := range n.Boards {
			for _, s := range b {
				if isFree(n, s) && req.fits(s, 0) {
					k++
				}
			}
		}
		return k
	}
	slices.SortStableFunc(out, func(a, b Node) int {
		return cmp.Or(cmp.Compare(freeChips(b), freeChips(a)), cmp.Compare(a.Live, b.Live), cmp.Compare(a.ID, b.ID))
	})
	return out
}
