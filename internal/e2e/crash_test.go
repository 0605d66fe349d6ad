package e2e

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/faas"
)

// chipTruth is what a simulated chip holds, from the board's state file:
// the board outlives faasd, as a real one does.
type chipTruth struct {
	Model  string    `json:"model"`
	Digest [8]uint32 `json:"image_digest"`
}

func (c chipTruth) digest() string {
	var b [32]byte
	for i, w := range c.Digest {
		binary.LittleEndian.PutUint32(b[4*i:], w)
	}
	if b == ([32]byte{}) {
		return ""
	}
	return "sha256:" + hex.EncodeToString(b[:])
}

func boardTruth(t *testing.T, stateDir string) []chipTruth {
	t.Helper()
	var out []chipTruth
	for i := range 2 {
		data, err := os.ReadFile(filepath.Join(stateDir, "sim", fmt.Sprintf("SIM%04d.json", i)))
		if errors.Is(err, os.ErrNotExist) {
			out = append(out, chipTruth{}, chipTruth{})
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		var st struct{ Chips []chipTruth }
		if err := json.Unmarshal(data, &st); err != nil {
			t.Fatal(err)
		}
		out = append(out, st.Chips...)
	}
	return out
}

// TestSIGKILLDuringLoad kills faasd with SIGKILL at many points of a load of
// the two-chip image (at the start of each phase, then at random moments),
// starts it again on the same state directory and boards, and checks that
// no slot reports an image other than the one on its chip, and that a load
// after the last kill works.
func TestSIGKILLDuringLoad(t *testing.T) {
	p := newPlatform(t)
	socket := filepath.Join(p.dir(t, "run"), "faasd.sock")
	state := filepath.Join(p.root, "faasd-state")
	tok := newToken(t, p.regURL, "alice", "crash")
	ctx := context.Background()

	check := func(when string) map[int]agentapi.Slot {
		t.Helper()
		c, err := faas.Dial(ctx, socket, faas.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		slots, err := c.Slots(ctx)
		if err != nil {
			t.Fatalf("%s: slots: %v", when, err)
		}
		truth := boardTruth(t, state)
		bySlot := map[int]agentapi.Slot{}
		for _, s := range slots {
			bySlot[s.Index] = s
			chip := truth[s.Index]
			switch s.State {
			case agentapi.Loaded:
				if s.Image == nil || s.Image.Digest != chip.digest() || chip.Model != "alidnn" {
					t.Errorf("%s: slot %d reports %+v loaded, the chip holds role %q with digest %q", when, s.Index, s.Image, chip.Model, chip.digest())
				}
			case agentapi.Loading:
				t.Errorf("%s: slot %d still loading after a restart", when, s.Index)
			default:
				if s.Image != nil {
					t.Errorf("%s: slot %d is %s but names image %+v", when, s.Index, s.State, s.Image)
				}
			}
		}
		return bySlot
	}

	// The kill points: the start of each phase, then random moments up to
	// the length of an undisturbed load.
	phases := []string{agentapi.PhaseResolve, agentapi.PhaseVerify, agentapi.PhasePull, agentapi.PhaseKey, agentapi.PhaseProgram, agentapi.PhaseSelfTest}
	rng := rand.New(rand.NewPCG(7, 11))
	var loadTime time.Duration
	type point struct {
		phase string
		after time.Duration
	}
	var points []point
	for _, ph := range phases {
		points = append(points, point{phase: ph})
	}
	for range 6 {
		points = append(points, point{after: -1}) // drawn once the load time is known
	}

	faasd, _ := p.startFaasd(t, socket, state)
	check("first start")
	// One undisturbed load measures the load time; clear it again.
	{
		c, err := faas.Dial(ctx, socket, faas.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		l, err := c.Load(ctx, p.dual.ref)
		if err != nil {
			t.Fatalf("undisturbed load: %v", err)
		}
		loadTime = time.Since(start)
		if _, err := c.Clear(ctx, l.Slots[0]); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	kills := 0
	for k, pt := range points {
		when := fmt.Sprintf("kill %d", k)
		if pt.after < 0 {
			pt.after = time.Duration(rng.Int64N(int64(loadTime)))
		}
		c, err := faas.Dial(ctx, socket, faas.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		// Every other round reloads slots that hold the image, so that a
		// kill lands while a loaded chip is being reprogrammed.
		req := agentapi.LoadRequest{Image: p.dual.ref}
		if k%2 == 1 {
			zero := 0
			req.Slot = &zero
			if _, err := c.Load(ctx, p.dual.ref, faas.OnSlot(0)); err != nil {
				t.Fatalf("%s: loading before the reload: %v", when, err)
			}
			when += ", reloading"
		}
		l, err := c.StartLoad(ctx, req)
		if err != nil {
			t.Fatalf("%s: start load: %v", when, err)
		}
		dead := faasd
		kill := func() {
			dead.cmd.Process.Signal(syscall.SIGKILL)
			<-dead.done
		}
		if pt.phase != "" {
			when += " at " + pt.phase
			ectx, cancel := context.WithTimeout(ctx, time.Minute)
			c.Events(ectx, l.ID, func(e agentapi.Event) error {
				if e.Phase == pt.phase || e.Load != nil {
					kill()
					return errors.New("killed")
				}
				return nil
			})
			cancel()
		} else {
			when += fmt.Sprintf(" after %v", pt.after.Round(time.Millisecond))
			time.Sleep(pt.after)
			kill()
		}
		c.Close()
		kills++
		faasd, _ = p.startFaasd(t, socket, state)
		slots := check(when)
		// Start the next round from cleared slots.
		c, err = faas.Dial(ctx, socket, faas.WithToken(tok))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slots {
			if s.State != agentapi.Cleared {
				if _, err := c.Clear(ctx, s.Index); err != nil {
					t.Fatalf("%s: clearing slot %d: %v", when, s.Index, err)
				}
			}
		}
		c.Close()
		check(when + ", cleared")
	}
	t.Logf("%d kills, undisturbed load %v", kills, loadTime.Round(time.Millisecond))

	// After the last kill a load works and reports what is on the chips.
	c, err := faas.Dial(ctx, socket, faas.WithToken(tok))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.Load(ctx, p.dual.ref)
	if err != nil {
		t.Fatalf("load after the kills: %v", err)
	}
	slots := check("after the last load")
	for _, i := range l.Slots {
		if s := slots[i]; s.State != agentapi.Loaded {
			t.Errorf("slot %d after the last load: %s", i, s.State)
		}
	}
}
