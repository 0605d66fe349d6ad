//go:build linux

package pcie

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/services/agent/pcie/pcietest"
	"github.com/fpga-faas/faas/shell"
)

const (
	rootPortA = "pci0000:00/0000:00:01.0"
	switchA   = rootPortA + "/0000:01:00.0"
	rootPortB = "pci0000:00/0000:00:02.0"
	switchB   = rootPortB + "/0000:05:00.0"
)

// hostFuncs is a host with two boards and two distractors: an Intel NIC and
// a Xilinx development board (10ee:7038) on root ports of their own.
func hostFuncs() []pcietest.Func {
	return []pcietest.Func{
		pcietest.Bridge("pci0000:00/0000:00:00.0"),
		pcietest.Bridge(rootPortA),
		pcietest.Bridge(switchA),
		pcietest.Bridge(switchA + "/0000:02:00.0"),
		pcietest.Bridge(switchA + "/0000:02:01.0"),
		pcietest.Chip(switchA+"/0000:02:00.0/0000:03:00.0", shell.ModelVU9PDual, 0, pcietest.XDMANodes(0, 2, 16)),
		pcietest.Chip(switchA+"/0000:02:01.0/0000:04:00.0", shell.ModelVU9PDual, 0, pcietest.XDMANodes(1, 2, 16)),
		pcietest.Bridge(rootPortB),
		pcietest.Bridge(switchB),
		pcietest.Bridge(switchB + "/0000:06:00.0"),
		pcietest.Bridge(switchB + "/0000:06:01.0"),
		// Chip BDFs in the opposite order of their downstream ports: the
		// ports decide the index.
		pcietest.Chip(switchB+"/0000:06:00.0/0000:08:00.0", shell.ModelKU15PDual, 1, pcietest.XDMANodes(2, 1, 16)),
		pcietest.Chip(switchB+"/0000:06:01.0/0000:07:00.0", shell.ModelKU15PDual, 1, nil),
		{Path: "pci0000:00/0000:00:03.0", Vendor: 0x8086, Device: 0x1572, SubsystemVendor: 0x8086, SubsystemDevice: 0x0000, Class: 0x020000, Driver: "i40e"},
		{Path: "pci0000:00/0000:00:04.0", Vendor: 0x10ee, Device: 0x7038, SubsystemVendor: 0x10ee, SubsystemDevice: 0x0007, Class: 0x058000},
	}
}

// wantBoards is what hostFuncs describes.
func wantBoards() []Board {
	events := make([]int, 16)
	for i := range events {
		events[i] = i
	}
	xilinx := func(bdf string, model shell.BoardModel) Chip {
		return Chip{
			BDF: bdf, Vendor: 0x10ee, Device: 0x903f,
			SubsystemVendor: 0x10ee, SubsystemDevice: model.SubsystemID,
		}
	}
	a0 := xilinx("0000:03:00.0", shell.ModelVU9PDual)
	a0.Driver, a0.XDMA, a0.H2C, a0.C2H, a0.Events = "xdma", "xdma0", []int{0, 1}, []int{0, 1}, events
	a1 := xilinx("0000:04:00.0", shell.ModelVU9PDual)
	a1.Index, a1.Driver, a1.XDMA, a1.H2C, a1.C2H, a1.Events = 1, "xdma", "xdma1", []int{0, 1}, []int{0, 1}, events
	b0 := xilinx("0000:08:00.0", shell.ModelKU15PDual)
	b0.NUMANode, b0.Driver, b0.XDMA, b0.H2C, b0.C2H, b0.Events = 1, "xdma", "xdma2", []int{0}, []int{0}, events
	b1 := xilinx("0000:07:00.0", shell.ModelKU15PDual)
	b1.Index, b1.NUMANode = 1, 1
	return []Board{
		{ID: "0000:01:00.0", Model: shell.ModelVU9PDual, Chips: []Chip{a0, a1}},
		{ID: "0000:05:00.0", Model: shell.ModelKU15PDual, Chips: []Chip{b0, b1}},
	}
}

func TestBoards(t *testing.T) {
	root := pcietest.WriteSysfs(t, hostFuncs())
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if err != nil {
		t.Fatalf("Boards: %v", err)
	}
	if want := wantBoards(); !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
}

// boardError checks that err holds a *BoardError for board id and that its
// message mentions every string in mention.
func boardError(t *testing.T, err error, id string, mention ...string) {
	t.Helper()
	t.Logf("error: %v", err)
	var be *BoardError
	if !errors.As(err, &be) {
		t.Fatalf("error %v: no *BoardError", err)
	}
	if be.ID != id {
		t.Errorf("BoardError.ID = %q, want %q", be.ID, id)
	}
	for _, s := range mention {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestBoardsMissingChip(t *testing.T) {
	funcs := hostFuncs()
	var kept []pcietest.Func
	for _, f := range funcs {
		if !strings.HasSuffix(f.Path, "/0000:04:00.0") {
			kept = append(kept, f)
		}
	}
	root := pcietest.WriteSysfs(t, kept)
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if want := wantBoards()[1:]; !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
	boardError(t, err, "0000:01:00.0", "0000:03:00.0", "found 1 of its 2 chips")
}

func TestBoardsUnknownSubsystem(t *testing.T) {
	funcs := hostFuncs()
	for i, f := range funcs {
		if strings.HasSuffix(f.Path, "/0000:07:00.0") {
			funcs[i].SubsystemDevice = 0x0f99
		}
	}
	root := pcietest.WriteSysfs(t, funcs)
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if want := wantBoards()[:1]; !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
	boardError(t, err, "0000:05:00.0", "0000:07:00.0", "0x0f99")
}

func TestBoardsModelMismatch(t *testing.T) {
	funcs := hostFuncs()
	for i, f := range funcs {
		if strings.HasSuffix(f.Path, "/0000:04:00.0") {
			funcs[i].SubsystemDevice = shell.ModelKU15PDual.SubsystemID
		}
	}
	root := pcietest.WriteSysfs(t, funcs)
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if want := wantBoards()[1:]; !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
	boardError(t, err, "0000:01:00.0", "0000:03:00.0", "0000:04:00.0", shell.ModelKU15PDual.Name)
}

func TestBoardsMalformedAttribute(t *testing.T) {
	for _, attr := range []string{"vendor", "subsystem_device", "numa_node", "resource"} {
		t.Run(attr, func(t *testing.T) {
			funcs := hostFuncs()
			for i, f := range funcs {
				if strings.HasSuffix(f.Path, "/0000:07:00.0") {
					funcs[i].Override = map[string]string{attr: "garbage\n"}
				}
			}
			root := pcietest.WriteSysfs(t, funcs)
			got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
			if want := wantBoards()[:1]; !reflect.DeepEqual(got, want) {
				t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
			}
			if err == nil {
				t.Fatal("Boards: no error")
			}
			t.Logf("error: %v", err)
			// u-root parses resource and names the directory only.
			file := filepath.Join(root, "bus", "pci", "devices", "0000:07:00.0")
			if attr != "resource" {
				file = filepath.Join(file, attr)
			}
			if !strings.Contains(err.Error(), file) {
				t.Errorf("error %q does not name %s", err, file)
			}
		})
	}
}

func TestBoardsEmpty(t *testing.T) {
	for name, root := range map[string]string{
		"no PCI bus": t.TempDir(),
		"no devices": pcietest.WriteSysfs(t, nil),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
			if len(got) != 0 || err != nil {
				t.Errorf("Boards = %v, %v; want none, nil", got, err)
			}
		})
	}
}

func TestBoardsMissingRoot(t *testing.T) {
	root := filepath.Join(t.TempDir(), "nonexistent")
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if got != nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), root) {
		t.Errorf("Boards = %v, %v; want nil and an error naming %s", got, err, root)
	}
}

func TestBoardsCanceled(t *testing.T) {
	root := pcietest.WriteSysfs(t, hostFuncs())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Scanner{SysfsRoot: root}).Boards(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Boards with a canceled context: %v, want context.Canceled", err)
	}
}
