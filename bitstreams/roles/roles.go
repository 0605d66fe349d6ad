// Package roles is the catalog of the platform's roles by their contracts:
// the roles an image may name, with the versions a shell v1 board can load.
// Validators (hdk validate, the registry) check images against it; it holds no
// functional model.
package roles

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
	"github.com/fpga-faas/faas/bitstreams/loopback"
)

// Role is one role's contract identity.
type Role struct {
	Name    string // design name in the role's bitstreams
	ID      uint32 // ROLE_ID once loaded
	Version uint32 // newest released version: major in bits 31:16, minor in 15:0
	Summary string
}

// VersionString formats Version as "major.minor".
func (r Role) VersionString() string { return fmt.Sprintf("%d.%d", r.Version>>16, r.Version&0xffff) }

// All lists the known roles.
var All = []Role{
	{Name: loopback.Name, ID: loopback.ID, Version: loopback.Version, Summary: "bring-up role: DDR copy, CRC-32, interrupt"},
	{Name: alidnn.Name, ID: alidnn.ID, Version: alidnn.Version, Summary: "AliDNN deep-learning engine: int8/fp32 GEMM, vector ALU, pooling"},
}

// Errors of Check.
var (
	ErrUnknown      = errors.New("unknown role")
	ErrIncompatible = errors.New("incompatible role version")
)

// Lookup returns the role called name.
func Lookup(name string) (Role, bool) {
	for _, r := range All {
		if r.Name == name {
			return r, true
		}
	}
	return Role{}, false
}

// Check reports whether an image may name role name at version
// ("major.minor"): the role must exist, and the version must be one that was
// released — the same major, a minor no newer than the newest. Minor versions
// only add registers, so software for 1.0 drives a 1.2 role, not the reverse.
func Check(name, version string) error {
	r, ok := Lookup(name)
	if !ok {
		return fmt.Errorf("%w %q", ErrUnknown, name)
	}
	major, minor, err := parseVersion(version)
	if err != nil {
		return fmt.Errorf("role %s: %w", name, err)
	}
	if major != r.Version>>16 || minor > r.Version&0xffff {
		return fmt.Errorf("%w: %s %s requested, %s %s is the newest release", ErrIncompatible, name, version, name, r.VersionString())
	}
	return nil
}

func parseVersion(v string) (major, minor uint32, err error) {
	a, b, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, fmt.Errorf("version %q is not major.minor", v)
	}
	ma, err1 := strconv.ParseUint(a, 10, 16)
	mi, err2 := strconv.ParseUint(b, 10, 16)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("version %q is not major.minor", v)
	}
	return uint32(ma), uint32(mi), nil
}
