package deviceplugin

import (
	"testing"
)

// FuzzDeviceID: device IDs come from the kubelet (Allocate,
// GetPreferredAllocation); parse accepts exactly the IDs the plugin
// advertises, each naming slots that exist.
func FuzzDeviceID(f *testing.F) {
	inv := newInventory(4, 4)
	advertised := map[string]bool{}
	for k := range numKinds {
		for _, d := range inv.devices(k) {
			advertised[k.String()+" "+d.ID] = true
			f.Add(uint8(k), d.ID)
		}
	}
	for _, s := range []string{"", "slot-", "slot-4", "slot-01", "slot--1", "slot-+1", "board-2", "slot-1-share-4",
		"slot-1-share-", "slot-1-share-1-share-1", "slot-99999999999999999999", "board-0 "} {
		f.Add(uint8(0), s)
		f.Add(uint8(2), s)
	}
	f.Fuzz(func(t *testing.T, k uint8, id string) {
		kd := kind(k % uint8(numKinds))
		ref, err := inv.parse(kd, id)
		if (err == nil) != advertised[kd.String()+" "+id] {
			t.Fatalf("parse(%s, %q): %v; advertised: %v", kd, id, err, advertised[kd.String()+" "+id])
		}
		for _, s := range ref.slots {
			if s < 0 || s >= inv.nslots {
				t.Fatalf("parse(%s, %q): slot %d", kd, id, s)
			}
		}
	})
}
