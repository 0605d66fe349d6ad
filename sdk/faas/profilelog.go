package faas

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn"
)

// A profile log is a session's kept profiles in a file, for tools such as
// `faas trace export`. It is JSON lines: a header object
//
//	{"format":"faas-profile-log","version":1,"tenant":"alice","slot":0,"jobs":N}
//
// then one object per job (ProfileRecord), oldest first.

// ProfileLogFormat and ProfileLogVersion name the profile log format.
const (
	ProfileLogFormat  = "faas-profile-log"
	ProfileLogVersion = 1
)

// Limits of ReadProfileLog.
const (
	maxProfileLine = 4 << 10
	maxProfileJobs = MaxKeptProfiles
)

// ErrProfileLog is wrapped by every error of ReadProfileLog about the
// file's contents.
var ErrProfileLog = errors.New("faas: bad profile log")

// ProfileLog is the profiles of one session.
type ProfileLog struct {
	Tenant   string
	Slot     int
	Profiles []Profile
}

type profileHeader struct {
	Format  string `json:"format"`
	Version int    `json:"version"`
	Tenant  string `json:"tenant"`
	Slot    int    `json:"slot"`
	Jobs    int    `json:"jobs"`
}

// profileRecord is one job in a profile log. Times are Unix nanoseconds
// and durations nanoseconds.
type profileRecord struct {
	Job         uint64       `json:"job"`
	SubmittedNS int64        `json:"submitted_ns"`
	CompletedNS int64        `json:"completed_ns"`
	QueueNS     int64        `json:"queue_ns"`
	EngineNS    int64        `json:"engine_ns"`
	Failed      bool         `json:"failed,omitempty"`
	Stats       alidnn.Stats `json:"stats"`
}

// WriteProfileLog writes l to w.
func WriteProfileLog(w io.Writer, l ProfileLog) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(profileHeader{ProfileLogFormat, ProfileLogVersion, l.Tenant, l.Slot, len(l.Profiles)}); err != nil {
		return err
	}
	for _, p := range l.Profiles {
		r := profileRecord{Job: p.Job, SubmittedNS: p.Submitted.UnixNano(), CompletedNS: p.Completed.UnixNano(),
			QueueNS: int64(p.QueueWait), EngineNS: int64(p.Engine), Failed: p.Failed, Stats: p.Stats}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadProfileLog reads a profile log. It refuses another format or
// version, lines over 4 KiB, more jobs than the header says or than
// MaxKeptProfiles, and negative or inconsistent times, naming the line.
func ReadProfileLog(r io.Reader) (ProfileLog, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 1024), maxProfileLine)
	line := 0
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrProfileLog, line, fmt.Sprintf(format, args...))
	}
	next := func(v any) (bool, error) {
		if !sc.Scan() {
			if err := sc.Err(); err != nil {
				if errors.Is(err, bufio.ErrTooLong) {
					return false, bad("longer than %d bytes", maxProfileLine)
				}
				return false, err
			}
			return false, nil
		}
		line++
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return false, bad("%v", err)
		}
		if dec.More() {
			return false, bad("more than one JSON value")
		}
		return true, nil
	}
	var h profileHeader
	ok, err := next(&h)
	if err != nil {
		return ProfileLog{}, err
	}
	if !ok {
		return ProfileLog{}, fmt.Errorf("%w: empty", ErrProfileLog)
	}
	if h.Format != ProfileLogFormat || h.Version != ProfileLogVersion {
		return ProfileLog{}, bad("format %q version %d, want %q version %d", h.Format, h.Version, ProfileLogFormat, ProfileLogVersion)
	}
	if h.Jobs < 0 || h.Jobs > maxProfileJobs || h.Slot < 0 || len(h.Tenant) > 256 {
		return ProfileLog{}, bad("header: jobs %d (0 to %d), slot %d, tenant of %d bytes", h.Jobs, maxProfileJobs, h.Slot, len(h.Tenant))
	}
	l := ProfileLog{Tenant: h.Tenant, Slot: h.Slot, Profiles: make([]Profile, 0, min(h.Jobs, 4096))}
	for {
		var rec profileRecord
		ok, err := next(&rec)
		if err != nil {
			return ProfileLog{}, err
		}
		if !ok {
			break
		}
		if len(l.Profiles) == h.Jobs {
			return ProfileLog{}, bad("more jobs than the header's %d", h.Jobs)
		}
		if rec.SubmittedNS < 0 || rec.CompletedNS < rec.SubmittedNS || rec.QueueNS < 0 || rec.EngineNS < 0 ||
			rec.Stats.ClockMHz < 0 || rec.Stats.ClockMHz > 10000 {
			return ProfileLog{}, bad("job %d: negative or reversed times, or a clock outside 0 to 10000 MHz", rec.Job)
		}
		l.Profiles = append(l.Profiles, Profile{Job: rec.Job, Submitted: time.Unix(0, rec.SubmittedNS), Completed: time.Unix(0, rec.CompletedNS),
			QueueWait: time.Duration(rec.QueueNS), Engine: time.Duration(rec.EngineNS), Failed: rec.Failed, Stats: rec.Stats})
	}
	if len(l.Profiles) != h.Jobs {
		return ProfileLog{}, fmt.Errorf("%w: %d jobs, the header says %d", ErrProfileLog, len(l.Profiles), h.Jobs)
	}
	return l, nil
}
