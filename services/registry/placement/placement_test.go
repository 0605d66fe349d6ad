package placement

import (
	"errors"
	"strings"
	"testing"
)

// parts is node id with one board of chips of part in the states given.
func parts(id, part string, states ...string) Node {
	b := board(states...)
	for i := range b {
		b[i].Part = part
	}
	return Node{ID: id, Boards: [][]Slot{b}}
}

func board(states ...string) []Slot {
	var b []Slot
	for i, s := range states {
		sl := Slot{Index: i, Chip: i, State: s}
		if s == Loaded {
			sl.Digest = "d"
		}
		b = append(b, sl)
	}
	return b
}

func TestPlace(t *testing.T) {
	two := func(id string, a, b string) Node { return Node{ID: id, Boards: [][]Slot{board(a, b)}} }
	cases := []struct {
		name  string
		nodes []Node
		req   Request
		want  Choice
		err   error
	}{
		{"spread to the node with most free chips", []Node{two("a", Cleared, Loaded), two("b", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1}, Choice{NodeID: "b", Slot: 0}, nil},
		{"ties: fewest live attachments, then id", []Node{{ID: "b", Boards: [][]Slot{board(Cleared, Cleared)}, Live: 1}, two("c", Cleared, Cleared), two("a", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1}, Choice{NodeID: "a", Slot: 0}, nil},
		{"held slots are not free, whatever the heartbeat says", []Node{{ID: "a", Boards: [][]Slot{board(Cleared, Cleared)}, Held: map[int]bool{0: true}}},
			Request{Digest: "x", Chips: 1}, Choice{NodeID: "a", Slot: 1}, nil},
		{"two chips need a whole free board", []Node{two("a", Cleared, Loaded), {ID: "b", Boards: [][]Slot{board(Loaded, Cleared), {{Index: 2, State: Cleared}, {Index: 3, State: Cleared}}}}},
			Request{Digest: "x", Chips: 2}, Choice{NodeID: "b", Slot: 2}, nil},
		{"no whole board", []Node{two("a", Cleared, Loaded), two("b", Loaded, Cleared)}, Request{Digest: "x", Chips: 2}, Choice{}, ErrNoCapacity},
		{"share joins a chip running the image", []Node{two("a", Cleared, Cleared), two("b", Cleared, Loaded)},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2}, Choice{NodeID: "b", Slot: 1, Warm: true}, nil},
		{"share prefers the chip with fewest shares", []Node{{ID: "a", Boards: [][]Slot{board(Loaded, Loaded)}, Shares: map[int]int{0: 1}}},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2}, Choice{NodeID: "a", Slot: 1, Warm: true}, nil},
		{"full chips send a share to a free chip", []Node{{ID: "a", Boards: [][]Slot{board(Loaded, Cleared)}, Shares: map[int]int{0: 2}}},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2}, Choice{NodeID: "a", Slot: 1}, nil},
		{"share never joins a whole attachment", []Node{{ID: "a", Boards: [][]Slot{board(Loaded, Loaded)}, Held: map[int]bool{0: true, 1: true}}},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2}, Choice{}, ErrNoCapacity},
		{"warm for the same tenant", []Node{two("a", Cleared, Cleared), {ID: "b", Boards: [][]Slot{board(Cleared, Loaded)}, Warm: map[int]string{1: "t1"}}},
			Request{TenantID: "t1", Digest: "d", Chips: 1}, Choice{NodeID: "b", Slot: 1, Warm: true}, nil},
		{"another tenant's warm chip is neither warm nor free", []Node{{ID: "b", Boards: [][]Slot{board(Cleared, Loaded)}, Warm: map[int]string{1: "t1"}}},
			Request{TenantID: "t2", Digest: "d", Chips: 1}, Choice{NodeID: "b", Slot: 0}, nil},
		{"no nodes", nil, Request{Digest: "d", Chips: 1}, Choice{}, ErrNoCapacity},
		{"only chips of the image's part", []Node{parts("a", "ku", Cleared, Cleared), parts("b", "vu", Cleared, Loaded)},
			Request{Digest: "x", Chips: 1, Parts: []string{"vu"}}, Choice{NodeID: "b", Slot: 0}, nil},
		{"no chip of the part", []Node{parts("a", "ku", Cleared, Cleared)}, Request{Digest: "x", Chips: 1, Parts: []string{"vu"}}, Choice{}, ErrNoCapacity},
		{"a chip of unknown part takes no image of a known part", []Node{parts("a", "", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1, Parts: []string{"vu"}}, Choice{}, ErrNoCapacity},
		{"an image of unknown part goes anywhere", []Node{parts("a", "ku", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1}, Choice{NodeID: "a", Slot: 0}, nil},
		{"two chips of the part", []Node{parts("a", "ku", Cleared, Cleared), parts("b", "vu", Cleared, Cleared)},
			Request{Digest: "x", Chips: 2, Parts: []string{"vu", "vu"}}, Choice{NodeID: "b", Slot: 0}, nil},
		{"a share never joins a chip of another part", []Node{parts("a", "ku", Loaded, Cleared)},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2, Parts: []string{"vu"}}, Choice{}, ErrNoCapacity},
		{"spread by free chips of the image's part", []Node{{ID: "a", Boards: [][]Slot{parts("", "vu", Cleared, Loaded).Boards[0],
			{{Index: 2, State: Cleared, Part: "ku"}, {Index: 3, State: Cleared, Part: "ku"}}}}, parts("b", "vu", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1, Parts: []string{"vu"}}, Choice{NodeID: "b", Slot: 0}, nil},
		{"a one-chip image for chip 1 goes on chip 1", []Node{two("a", Cleared, Cleared)},
			Request{Digest: "x", Chips: 1, Indexes: []int{1}}, Choice{NodeID: "a", Slot: 1}, nil},
		{"a one-chip image for chip 0 never on chip 1", []Node{two("a", Loaded, Cleared)},
			Request{Digest: "x", Chips: 1, Indexes: []int{0}}, Choice{}, ErrNoCapacity},
		{"an image for either chip takes the first free", []Node{two("a", Loaded, Cleared)},
			Request{Digest: "x", Chips: 1, Indexes: []int{-1}}, Choice{NodeID: "a", Slot: 1}, nil},
		{"a share joins only the chip its bitstream is for", []Node{{ID: "a", Boards: [][]Slot{board(Loaded, Loaded)}, Shares: map[int]int{1: 1}}},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2, Indexes: []int{1}}, Choice{NodeID: "a", Slot: 1, Warm: true}, nil},
		{"spread by free chips the image can take", []Node{two("a", Cleared, Cleared), two("b", Loaded, Cleared), two("c", Cleared, Loaded)},
			Request{Digest: "x", Chips: 1, Indexes: []int{1}}, Choice{NodeID: "a", Slot: 1}, nil},
		{"excluded nodes are skipped", []Node{two("a", Cleared, Cleared), two("b", Cleared, Loaded)},
			Request{Digest: "x", Chips: 1, Exclude: []string{"a"}}, Choice{NodeID: "b", Slot: 0}, nil},
		{"everything excluded", []Node{two("a", Cleared, Cleared)}, Request{Digest: "x", Chips: 1, Exclude: []string{"a"}}, Choice{}, ErrNoCapacity},
		{"a second share joins the first from the records, before any heartbeat shows it",
			[]Node{{ID: "a", Boards: [][]Slot{board(Cleared, Cleared)}, Shares: map[int]int{1: 1}, ShareDigest: map[int]string{1: "x"}}},
			Request{Digest: "x", Chips: 1, Share: true, MaxShares: 2}, Choice{NodeID: "a", Slot: 1}, nil},
		{"the records win over a heartbeat showing the image on another image's shared chip",
			[]Node{{ID: "a", Boards: [][]Slot{board(Loaded, Cleared)}, Shares: map[int]int{0: 1}, ShareDigest: map[int]string{0: "y"}}},
			Request{Digest: "d", Chips: 1, Share: true, MaxShares: 2}, Choice{NodeID: "a", Slot: 1}, nil},
	}
	for _, c := range cases {
		got, err := Place(c.nodes, c.req)
		if got != c.want || !errors.Is(err, c.err) || (c.err == nil && err != nil) {
			t.Errorf("%s: got %+v, %v; want %+v, %v", c.name, got, err, c.want, c.err)
		}
	}
	_, err := Place([]Node{parts("a", "ku", Cleared, Cleared)}, Request{Digest: "x", Chips: 1, Parts: []string{"vu"}})
	if err == nil || !strings.Contains(err.Error(), "no node in the pool has a free vu chip") {
		t.Errorf("no chip of the part: %v", err)
	}
	_, err = Place(nil, Request{Digest: "x", Chips: 2, Parts: []string{"vu", "vu"}})
	if err == nil || !strings.Contains(err.Error(), "a board of two free vu chips") {
		t.Errorf("no board of the part: %v", err)
	}
	if _, err := Place(nil, Request{Chips: 2, Share: true}); err == nil {
		t.Error("a shared two-chip image was placed")
	}
	if _, err := Place(nil, Request{Chips: 3}); err == nil {
		t.Error("a three-chip image was placed")
	}
}

func TestWanted(t *testing.T) {
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Chips: 1}, "room"},
		{Request{Chips: 1, Indexes: []int{-1}}, "room"},
		{Request{Chips: 1, Parts: []string{"vu"}}, "a free vu chip"},
		{Request{Chips: 1, Parts: []string{"vu"}, Indexes: []int{1}}, "a free vu chip 1 of a board"},
		{Request{Chips: 1, Indexes: []int{0}}, "a free chip 0 of a board"},
		{Request{Chips: 1, Share: true, Parts: []string{"vu"}, Indexes: []int{0}}, "a vu chip 0 of a board with a tenant window free"},
		{Request{Chips: 2, Parts: []string{"vu", "vu"}, Indexes: []int{0, 1}}, "a board of two free vu chips"},
		{Request{Chips: 2}, "room"},
	} {
		if got := Wanted(c.req); got != c.want {
			t.Errorf("Wanted(%+v) = %q, want %q", c.req, got, c.want)
		}
	}
}
