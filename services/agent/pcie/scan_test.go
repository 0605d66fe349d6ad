//go:build linux

package pcie

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fpga-faas/faas/shell"
)

// fakeFunc is one PCI function of a fake sysfs tree.
type fakeFunc struct {
	path                 string // real path under devices/, ending in the BDF
	vendor, device       uint16
	subVendor, subDevice uint16
	class                uint32
	numa                 int
	driver               string   // "" for no driver symlink
	xdma                 []string // class devices under xdma/
	override             map[string]string
}

const (
	rootPortA = "pci0000:00/0000:00:01.0"
	switchA   = rootPortA + "/0000:01:00.0"
	rootPortB = "pci0000:00/0000:00:02.0"
	switchB   = rootPortB + "/0000:05:00.0"
)

// xdmaNodes lists the class devices the XDMA driver creates for instance n.
func xdmaNodes(n, channels, events int) []string {
	p := fmt.Sprintf("xdma%d_", n)
	nodes := []string{p + "user", p + "control", p + "xvc"}
	for k := range channels {
		nodes = append(nodes, fmt.Sprintf("%sh2c_%d", p, k), fmt.Sprintf("%sc2h_%d", p, k),
			fmt.Sprintf("%sbypass_h2c_%d", p, k))
	}
	for k := range events {
		nodes = append(nodes, fmt.Sprintf("%sevents_%d", p, k))
	}
	return nodes
}

func bridge(path string) fakeFunc {
	return fakeFunc{path: path, vendor: 0x10b5, device: 0x8724, class: 0x060400}
}

func chip(path string, model shell.BoardModel, numa int, xdma []string) fakeFunc {
	f := fakeFunc{
		path: path, vendor: shell.VendorXilinx, device: shell.DeviceID,
		subVendor: shell.SubsystemVendor, subDevice: model.SubsystemID,
		class: shell.ClassCode, numa: numa, xdma: xdma,
	}
	if xdma != nil {
		f.driver = "xdma"
	}
	return f
}

// hostFuncs is a host with two boards and two distractors: an Intel NIC and
// a Xilinx development board (10ee:7038) on root ports of their own.
func hostFuncs() []fakeFunc {
	return []fakeFunc{
		bridge("pci0000:00/0000:00:00.0"),
		bridge(rootPortA),
		bridge(switchA),
		bridge(switchA + "/0000:02:00.0"),
		bridge(switchA + "/0000:02:01.0"),
		chip(switchA+"/0000:02:00.0/0000:03:00.0", shell.ModelVU9PDual, 0, xdmaNodes(0, 2, 16)),
		chip(switchA+"/0000:02:01.0/0000:04:00.0", shell.ModelVU9PDual, 0, xdmaNodes(1, 2, 16)),
		bridge(rootPortB),
		bridge(switchB),
		bridge(switchB + "/0000:06:00.0"),
		bridge(switchB + "/0000:06:01.0"),
		// Chip BDFs in the opposite order of their downstream ports: the
		// ports decide the index.
		chip(switchB+"/0000:06:00.0/0000:08:00.0", shell.ModelKU15PDual, 1, xdmaNodes(2, 1, 16)),
		chip(switchB+"/0000:06:01.0/0000:07:00.0", shell.ModelKU15PDual, 1, nil),
		{path: "pci0000:00/0000:00:03.0", vendor: 0x8086, device: 0x1572, subVendor: 0x8086, subDevice: 0x0000, class: 0x020000, driver: "i40e"},
		{path: "pci0000:00/0000:00:04.0", vendor: 0x10ee, device: 0x7038, subVendor: 0x10ee, subDevice: 0x0007, class: 0x058000},
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

// writeSysfs builds a sysfs tree of funcs under a new temporary directory:
// the real device directories under devices/, the bus/pci/devices symlinks
// to them and the driver symlinks into bus/pci/drivers, all relative as the
// kernel makes them.
func writeSysfs(t *testing.T, funcs []fakeFunc) string {
	t.Helper()
	root := t.TempDir()
	busDir := filepath.Join(root, "bus", "pci", "devices")
	mkdir(t, busDir)
	for _, f := range funcs {
		dir := filepath.Join(root, "devices", f.path)
		bdf := filepath.Base(f.path)
		mkdir(t, dir)
		files := map[string]string{
			"vendor":           fmt.Sprintf("0x%04x\n", f.vendor),
			"device":           fmt.Sprintf("0x%04x\n", f.device),
			"subsystem_vendor": fmt.Sprintf("0x%04x\n", f.subVendor),
			"subsystem_device": fmt.Sprintf("0x%04x\n", f.subDevice),
			"class":            fmt.Sprintf("0x%06x\n", f.class),
			"irq":              "16\n",
			"numa_node":        fmt.Sprintf("%d\n", f.numa),
			// 13 resources as the kernel lists them: BAR0, BAR1, then unused.
			"resource": "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200\n" +
				"0x00000000fc000000 0x00000000fc00ffff 0x0000000000040200\n" +
				strings.Repeat("0x0000000000000000 0x0000000000000000 0x0000000000000000\n", 11),
		}
		for name, s := range f.override {
			files[name] = s
		}
		for name, s := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		symlink(t, dir, filepath.Join(busDir, bdf))
		if f.driver != "" {
			drv := filepath.Join(root, "bus", "pci", "drivers", f.driver)
			mkdir(t, drv)
			symlink(t, drv, filepath.Join(dir, "driver"))
		}
		for _, node := range f.xdma {
			// A class device is a directory holding dev, uevent and so on.
			mkdir(t, filepath.Join(dir, "xdma", node))
		}
	}
	return root
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// symlink makes link point at target by a relative path.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		t.Fatal(err)
	}
}

func TestBoards(t *testing.T) {
	root := writeSysfs(t, hostFuncs())
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
	var kept []fakeFunc
	for _, f := range funcs {
		if !strings.HasSuffix(f.path, "/0000:04:00.0") {
			kept = append(kept, f)
		}
	}
	root := writeSysfs(t, kept)
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if want := wantBoards()[1:]; !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
	boardError(t, err, "0000:01:00.0", "0000:03:00.0", "found 1 of its 2 chips")
}

func TestBoardsUnknownSubsystem(t *testing.T) {
	funcs := hostFuncs()
	for i, f := range funcs {
		if strings.HasSuffix(f.path, "/0000:07:00.0") {
			funcs[i].subDevice = 0x0f99
		}
	}
	root := writeSysfs(t, funcs)
	got, err := Scanner{SysfsRoot: root}.Boards(t.Context())
	if want := wantBoards()[:1]; !reflect.DeepEqual(got, want) {
		t.Errorf("Boards:\n got %+v\nwant %+v", got, want)
	}
	boardError(t, err, "0000:05:00.0", "0000:07:00.0", "0x0f99")
}

func TestBoardsModelMismatch(t *testing.T) {
	funcs := hostFuncs()
	for i, f := range funcs {
		if strings.HasSuffix(f.path, "/0000:04:00.0") {
			funcs[i].subDevice = shell.ModelKU15PDual.SubsystemID
		}
	}
	root := writeSysfs(t, funcs)
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
				if strings.HasSuffix(f.path, "/0000:07:00.0") {
					funcs[i].override = map[string]string{attr: "garbage\n"}
				}
			}
			root := writeSysfs(t, funcs)
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
		"no devices": writeSysfs(t, nil),
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
	root := writeSysfs(t, hostFuncs())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := (Scanner{SysfsRoot: root}).Boards(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Boards with a canceled context: %v, want context.Canceled", err)
	}
}
