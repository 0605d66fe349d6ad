package pcie

import (
	"reflect"
	"testing"
)

func TestNodes(t *testing.T) {
	c := Chip{XDMA: "xdma2", H2C: []int{0, 1}, C2H: []int{0}, Events: []int{0, 15}}
	want := NodePaths{
		User:    "/dev/xdma2_user",
		Control: "/dev/xdma2_control",
		H2C:     []string{"/dev/xdma2_h2c_0", "/dev/xdma2_h2c_1"},
		C2H:     []string{"/dev/xdma2_c2h_0"},
		Events:  []string{"/dev/xdma2_events_0", "/dev/xdma2_events_15"},
	}
	if got := c.Nodes(""); !reflect.DeepEqual(got, want) {
		t.Errorf("Nodes(\"\"):\n got %+v\nwant %+v", got, want)
	}
	if got := c.Nodes("/tmp/dev").User; got != "/tmp/dev/xdma2_user" {
		t.Errorf("Nodes(\"/tmp/dev\").User = %q", got)
	}
	if got := (Chip{BDF: "0000:07:00.0"}).Nodes(""); !reflect.DeepEqual(got, NodePaths{}) {
		t.Errorf("Nodes of a chip without XDMA = %+v, want zero", got)
	}
}
