package server

// Allocation credentials: a bearer credential, "faasa_<id>_<secret>", that
// opens sessions on some slots and no others. Two issuers give them out:
// the device plugin (services/agent/deviceplugin), to each container the
// kubelet allocates chips, boards or AliDNN shares to (Issue); and the
// registry's accelerator pool, to the tenant of an attachment placed on
// this node (Install: the node is given only the secret's hash, and the
// id is the attachment's). It stands for no tenant: the agent's rules
// for sessions (session.go) apply with the allocation as the caller.
//
//   - A whole-slot grant (faas.dev/chip, faas.dev/board) opens sessions on
//     its slots as the tenant that loaded them, as that tenant's own
//     processes would: the pod works on behalf of whoever loaded its chips.
//     The first session binds the grant to that tenant: once another
//     tenant has loaded the slot, the grant opens nothing there.
//   - A share grant (faas.dev/alidnn-share) holds, per slot, a number of
//     the chip's tenant windows: at most that many sessions at once, each
//     its own window, scheduled as a tenant of its own ("alloc/<id>") so
//     that every allocation gets its own fair share of the engine.
//
// Only the SHA-256 of the secret is kept, in memory; a credential is
// checked by its id, then by comparing hashes in constant time. Revoke
// ends a credential (the plugin does when the kubelet has handed the
// devices on) and End also ends the sessions it opened (an attachment's
// end); a restart of faasd ends them all (the pool installs its
// attachments' again).

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"

	"github.com/fpga-faas/faas/sdk/agentapi"
)

// GrantPrefix starts every allocation credential, so that the agent tells
// them from registry tokens ("faas_…") without asking the registry.
const GrantPrefix = "faasa_"

// ErrBadGrant is returned by Issue for a grant that names no slot.
var ErrBadGrant = errors.New("grant names no slot")

// Grant is what one allocation credential allows.
type Grant struct {
	// ID names the allocation (the plugin's); it is part of the
	// credential and of the tenant name share sessions run under.
	ID string
	// Slots are whole slots: sessions on them act as their loader.
	Slots []int
	// Shares maps a slot to the number of its tenant windows the grant
	// holds: the most sessions it may have open there at once.
	Shares map[int]int
}

// Grants holds the live allocation credentials. It is safe for concurrent
// use; the zero value is not: use NewGrants.
type Grants struct {
	mu   sync.Mutex
	byID map[string]*grantEntry
}

type grantEntry struct {
	g     Grant
	hash  [32]byte
	open  map[int]int    // share sessions open, by slot
	bound map[int]string // tenant of each whole slot, from the first session
	conns map[net.Conn]struct{}
	ended bool
}

// NewGrants returns an empty credential store.
func NewGrants() *Grants { return &Grants{byID: map[string]*grantEntry{}} }

// Issue records g and returns its credential; the id in g must be unique
// among live grants, else the older is replaced.
func (gs *Grants) Issue(g Grant) (string, error) {
	var secret [32]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return "", err
	}
	tok := GrantPrefix + g.ID + "_" + base64.RawURLEncoding.EncodeToString(secret[:])
	if err := gs.Install(g, sha256.Sum256(secret[:])); err != nil {
		return "", err
	}
	return tok, nil
}

// Install records g under a credential whose secret's SHA-256 is sum: the
// issuer keeps the secret, this node never sees it. A live grant of the
// same id is replaced.
func (gs *Grants) Install(g Grant, sum [32]byte) error {
	if len(g.Slots) == 0 && len(g.Shares) == 0 {
		return fmt.Errorf("server: grant %q: %w", g.ID, ErrBadGrant)
	}
	if g.ID == "" || strings.ContainsAny(g.ID, "_ ") {
		return fmt.Errorf("server: grant id %q: want a non-empty id without '_' or spaces", g.ID)
	}
	g.Slots, g.Shares = slices.Clone(g.Slots), maps.Clone(g.Shares)
	gs.mu.Lock()
	gs.byID[g.ID] = &grantEntry{g: g, hash: sum, open: map[int]int{}, bound: map[int]string{}, conns: map[net.Conn]struct{}{}}
	gs.mu.Unlock()
	return nil
}

// End revokes the credential of id and closes the sessions it opened.
func (gs *Grants) End(id string) {
	gs.mu.Lock()
	e := gs.byID[id]
	delete(gs.byID, id)
	var conns []net.Conn
	if e != nil {
		e.ended = true
		for c := range e.conns {
			conns = append(conns, c)
		}
	}
	gs.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// track counts conn, a session opened with e, until untrack; false when
// e has ended meanwhile.
func (gs *Grants) track(e *grantEntry, conn net.Conn) (untrack func(), ok bool) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if e.ended {
		return nil, false
	}
	e.conns[conn] = struct{}{}
	return func() {
		gs.mu.Lock()
		delete(e.conns, conn)
		gs.mu.Unlock()
	}, true
}

// Revoke ends the credential of allocation id; sessions already open run on.
func (gs *Grants) Revoke(id string) {
	gs.mu.Lock()
	delete(gs.byID, id)
	gs.mu.Unlock()
}

// NewGrantID returns a random allocation id.
func NewGrantID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lookup returns the grant of credential tok.
func (gs *Grants) lookup(tok string) (*grantEntry, error) {
	rest, _ := strings.CutPrefix(tok, GrantPrefix)
	id, enc, ok := strings.Cut(rest, "_")
	// Strict: 43 characters carry 258 bits, and a lax decoder ignores the
	// last two, so four spellings would name one secret; only the one
	// issued is the credential.
	secret, err := base64.RawURLEncoding.Strict().DecodeString(enc)
	if !ok || err != nil || len(secret) != 32 {
		return nil, agentErr(agentapi.CodeUnauthenticated, "malformed allocation credential", "use the credential as it was given: $FAAS_ALLOCATION_TOKEN in a pod, an attachment's from the registry")
	}
	gs.mu.Lock()
	e := gs.byID[id]
	gs.mu.Unlock()
	h := sha256.Sum256(secret)
	// Compare even when the id is unknown, so that timing tells nothing.
	want := [32]byte{}
	if e != nil {
		want = e.hash
	}
	if subtle.ConstantTimeCompare(h[:], want[:]) != 1 || e == nil {
		return nil, agentErr(agentapi.CodeUnauthenticated, "the allocation credential is not (or no longer) valid",
			"a pod's devices were allocated before faasd restarted or were handed on: restart the pod; an attachment has ended or is not ready yet: see `faas attachments`")
	}
	return e, nil
}

// whole reports whether the grant holds slot i whole.
func (e *grantEntry) whole(i int) bool { return slices.Contains(e.g.Slots, i) }

// tenant is the name share sessions of the grant run under.
func (e *grantEntry) tenant() string { return "alloc/" + e.g.ID }

// bind binds whole slot i of the grant to tenant, the slot's loader, at
// the first session; later it fails if the slot's loader is another.
func (gs *Grants) bind(e *grantEntry, i int, tenant string) error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	b, ok := e.bound[i]
	if !ok {
		e.bound[i] = tenant
		return nil
	}
	if b != tenant {
		return fmt.Errorf("slot %d was loaded by another tenant since this allocation first used it", i)
	}
	return nil
}

// takeWindow counts a share session on slot i; it fails when the grant's
// windows there are all in use. release gives it back.
func (gs *Grants) takeWindow(e *grantEntry, i int) (release func(), err error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	n := e.g.Shares[i]
	if e.open[i] >= n {
		return nil, fmt.Errorf("the allocation's %d window(s) on slot %d are all in use", n, i)
	}
	e.open[i]++
	return func() {
		gs.mu.Lock()
		e.open[i]--
		gs.mu.Unlock()
	}, nil
}
