package validate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// version is a major.minor version, as the shell's Version register holds it.
type version struct{ major, minor uint16 }

func (v version) cmp(w version) int {
	switch {
	case v.major != w.major:
		return int(v.major) - int(w.major)
	default:
		return int(v.minor) - int(w.minor)
	}
}

// comparison is one item of a version range, e.g. ">=1.0".
type comparison struct {
	op string
	v  version
}

// ops are the comparisons of SPEC.md; two-character ones first, so that
// ">=1" is not read as ">" "=1".
var ops = []struct {
	op string
	ok func(c int) bool
}{
	{">=", func(c int) bool { return c >= 0 }},
	{"<=", func(c int) bool { return c <= 0 }},
	{">", func(c int) bool { return c > 0 }},
	{"<", func(c int) bool { return c < 0 }},
	{"=", func(c int) bool { return c == 0 }},
}

// versionRange is a comma-separated list of comparisons, all of which a
// version must satisfy: ">=1.0,<2".
type versionRange []comparison

// parseRange parses a range of shell versions. A version is "major" or
// "major.minor" of decimal numbers below 65536 (the Version register's
// halves); "major" means "major.0". Spaces around items are allowed.
func parseRange(s string) (versionRange, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty range")
	}
	var r versionRange
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		c, err := parseComparison(item)
		if err != nil {
			return nil, err
		}
		r = append(r, c)
	}
	return r, nil
}

func parseComparison(item string) (comparison, error) {
	for _, o := range ops {
		rest, ok := strings.CutPrefix(item, o.op)
		if !ok {
			continue
		}
		v, err := parseVersion(strings.TrimSpace(rest))
		if err != nil {
			return comparison{}, fmt.Errorf("%q: %w", item, err)
		}
		return comparison{o.op, v}, nil
	}
	return comparison{}, fmt.Errorf("%q is not a comparison (>=, >, <=, <, = and a version)", item)
}

func parseVersion(s string) (version, error) {
	a, b, hasMinor := strings.Cut(s, ".")
	major, err := parseUint16(a)
	if err != nil {
		return version{}, fmt.Errorf("version %q is not major or major.minor", s)
	}
	var minor uint16
	if hasMinor {
		if minor, err = parseUint16(b); err != nil {
			return version{}, fmt.Errorf("version %q is not major or major.minor", s)
		}
	}
	return version{major, minor}, nil
}

// parseUint16 parses decimal digits only: strconv alone would accept "+1"
// in some forms and "0x1" in others.
func parseUint16(s string) (uint16, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a number")
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return uint16(n), err
}

// contains reports whether v satisfies every comparison of r.
func (r versionRange) contains(v version) bool {
	for _, c := range r {
		for _, o := range ops {
			if o.op == c.op && !o.ok(v.cmp(c.v)) {
				return false
			}
		}
	}
	return true
}

// ShellAccepts reports whether the range of shell versions an image
// accepts (its config's shell.versions, e.g. ">=1.0,<2") includes the shell
// version v of a chip, as the Version register holds it (major in bits
// 31:16, minor in 15:0). Nodes call it before they program a chip.
func ShellAccepts(versions string, v uint32) (bool, error) {
	r, err := parseRange(versions)
	if err != nil {
		return false, err
	}
	return r.contains(version{uint16(v >> 16), uint16(v)}), nil
}
