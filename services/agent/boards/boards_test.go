//go:build linux

package boards_test

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fpga-faas/faas/services/agent/boards"
	"github.com/fpga-faas/faas/services/agent/device"
	"github.com/fpga-faas/faas/services/agent/device/xdma"
	"github.com/fpga-faas/faas/services/agent/pcie/pcietest"
	"github.com/fpga-faas/faas/shell"
	"github.com/fpga-faas/faas/shell/sim"
)

// The host of these tests: a faas-vu9p-dual board whose chips the XDMA driver
// runs as xdma0 and xdma1, a faas-ku15p-dual board without a driver bound to
// either chip, and a NIC.
const (
	goodSwitch = "pci0000:00/0000:00:01.0/0000:01:00.0"
	goodID     = "0000:01:00.0"
	bareSwitch = "pci0000:00/0000:00:02.0/0000:05:00.0"
	bareID     = "0000:05:00.0"
	bareChip0  = "0000:07:00.0"
)

func hostFuncs() []pcietest.Func {
	return []pcietest.Func{
		pcietest.Bridge("pci0000:00/0000:00:00.0"),
		pcietest.Bridge("pci0000:00/0000:00:01.0"),
		pcietest.Bridge(goodSwitch),
		pcietest.Bridge(goodSwitch + "/0000:02:00.0"),
		pcietest.Bridge(goodSwitch + "/0000:02:01.0"),
		pcietest.Chip(goodSwitch+"/0000:02:00.0/0000:03:00.0", shell.ModelVU9PDual, 0, pcietest.XDMANodes(0, 2, 16)),
		pcietest.Chip(goodSwitch+"/0000:02:01.0/0000:04:00.0", shell.ModelVU9PDual, 0, pcietest.XDMANodes(1, 2, 16)),
		pcietest.Bridge("pci0000:00/0000:00:02.0"),
		pcietest.Bridge(bareSwitch),
		pcietest.Bridge(bareSwitch + "/0000:06:00.0"),
		pcietest.Bridge(bareSwitch + "/0000:06:01.0"),
		pcietest.Chip(bareSwitch+"/0000:06:00.0/"+bareChip0, shell.ModelKU15PDual, 1, nil),
		pcietest.Chip(bareSwitch+"/0000:06:01.0/0000:08:00.0", shell.ModelKU15PDual, 1, nil),
		{
			Path: "pci0000:00/0000:00:03.0", Vendor: 0x8086, Device: 0x1572,
			SubsystemVendor: 0x8086, SubsystemDevice: 0x0000, Class: 0x020000, Driver: "i40e",
		},
	}
}

// simOpener stands the chips of sb in for the XDMA driver's nodes
// /dev/xdma<N>_<node>: instance N is the simulated chip chipOf[N]. Every
// other path does not exist. The paths opened are appended to opened.
func simOpener(sb *sim.Board, chipOf [2]int, opened *[]string) xdma.Opener {
	return func(path string, write bool) (xdma.File, error) {
		enoent := &os.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
		rest, ok := strings.CutPrefix(path, "/dev/xdma")
		if !ok {
			return nil, enoent
		}
		inst, node, ok := strings.Cut(rest, "_")
		n, err := strconv.Atoi(inst)
		if !ok || err != nil || strconv.Itoa(n) != inst || n < 0 || n >= len(chipOf) {
			return nil, enoent
		}
		f, err := sb.Chip(chipOf[n]).Node(node)
		if err != nil {
			// Not f itself: a nil *sim.Node would make a non-nil File.
			return nil, err
		}
		*opened = append(*opened, path)
		return f, nil
	}
}

func newSimBoard(t *testing.T) *sim.Board {
	t.Helper()
	sb, err := sim.NewBoard(sim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// openOne opens the host of hostFuncs with the simulated board behind the
// nodes and returns the one board that must open, and the error.
func openOne(t *testing.T, sb *sim.Board, chipOf [2]int) (*device.Board, []string, error) {
	t.Helper()
	var opened []string
	h := boards.Host{SysfsRoot: pcietest.WriteSysfs(t, hostFuncs()), DevRoot: "/dev", Opener: simOpener(sb, chipOf, &opened)}
	got, err := h.Open(t.Context())
	for _, b := range got {
		t.Cleanup(func() { b.Close() })
	}
	if len(got) != 1 {
		t.Fatalf("Open returned %d boards, want 1 (error: %v)", len(got), err)
	}
	return got[0], opened, err
}

// checkChips checks that b.Chips[i] is the simulated chip i, whatever the
// order of discovery: its index and part, and a DMA round trip that lands in
// simulated chip i's DDR and not in the other's.
func checkChips(t *testing.T, b *device.Board, sb *sim.Board) {
	t.Helper()
	const addr = 0x10000
	for i, c := range b.Chips {
		if c == nil {
			t.Fatalf("chip %d not opened", i)
		}
		if c.Index() != i {
			t.Errorf("Chips[%d].Index() = %d", i, c.Index())
		}
		if c.Part() != b.Model.Parts[i] {
			t.Errorf("Chips[%d].Part() = %s, want %s", i, c.Part().Name, b.Model.Parts[i].Name)
		}
		if c.Serial() != "SIM0000" {
			t.Errorf("Chips[%d].Serial() = %q, want SIM0000", i, c.Serial())
		}
		// A pattern of its own per chip, so a swapped pair shows.
		want := bytes.Repeat([]byte{0xa5, byte(i), 0x5a, byte(0x10 + i)}, 1024)
		if err := c.Write(t.Context(), addr, want); err != nil {
			t.Fatalf("Chips[%d].Write: %v", i, err)
		}
		got := make([]byte, len(want))
		if err := c.Read(t.Context(), addr, got); err != nil {
			t.Fatalf("Chips[%d].Read: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Chips[%d]: read back % x..., wrote % x...", i, got[:8], want[:8])
		}
		direct := make([]byte, len(want))
		if err := sb.Chip(i).C2H(t.Context(), 0, direct, addr); err != nil {
			t.Fatalf("simulated chip %d: C2H: %v", i, err)
		}
		if !bytes.Equal(direct, want) {
			t.Errorf("DMA through Chips[%d] did not land in simulated chip %d: it holds % x...", i, i, direct[:8])
		}
	}
}

func TestOpen(t *testing.T) {
	sb := newSimBoard(t)
	b, opened, err := openOne(t, sb, [2]int{0, 1})

	if b.ID != goodID {
		t.Errorf("board ID = %q, want the switch upstream port %s", b.ID, goodID)
	}
	if b.Model.Name != shell.ModelVU9PDual.Name {
		t.Errorf("board model = %s, want %s", b.Model.Name, shell.ModelVU9PDual.Name)
	}
	if b.Serial != "SIM0000" {
		t.Errorf("board serial = %q, want SIM0000", b.Serial)
	}
	checkChips(t, b, sb)

	// The nodes the scan found are the ones opened: both DMA channels of
	// both instances (event nodes are opened on first wait).
	for _, want := range []string{"/dev/xdma0_user", "/dev/xdma0_control", "/dev/xdma1_h2c_1", "/dev/xdma1_c2h_1"} {
		if !slices.Contains(opened, want) {
			t.Errorf("%s was not opened; opened %v", want, opened)
		}
	}

	// The board without a driver is reported, and only it.
	if err == nil {
		t.Fatal("Open: no error for the board without a driver")
	}
	t.Logf("error: %v", err)
	for _, s := range []string{bareID, bareChip0, "no XDMA device nodes"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	if strings.Contains(err.Error(), goodID) {
		t.Errorf("error %q mentions the board that opened, %s", err, goodID)
	}
}

// TestOpenOrdersByChipIndex swaps the simulated chips relative to the order
// of discovery (xdma0, under the first downstream port, is the shell's chip
// 1): the board's chips follow the shell's CHIP_INDEX register, not the PCIe
// topology.
func TestOpenOrdersByChipIndex(t *testing.T) {
	sb := newSimBoard(t)
	b, _, _ := openOne(t, sb, [2]int{1, 0})
	if b.ID != goodID {
		t.Errorf("board ID = %q, want %s", b.ID, goodID)
	}
	checkChips(t, b, sb)
}

func TestOpenEmpty(t *testing.T) {
	for name, root := range map[string]string{
		"no PCI bus": t.TempDir(),
		"no devices": pcietest.WriteSysfs(t, nil),
	} {
		t.Run(name, func(t *testing.T) {
			sb := newSimBoard(t)
			var opened []string
			h := boards.Host{SysfsRoot: root, DevRoot: "/dev", Opener: simOpener(sb, [2]int{0, 1}, &opened)}
			got, err := h.Open(t.Context())
			if len(got) != 0 || err != nil {
				t.Errorf("Open = %v, %v; want no boards, nil", got, err)
			}
			if len(opened) != 0 {
				t.Errorf("Open opened %v on a host without boards", opened)
			}
		})
	}
}
