package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"path/filepath"
	"testing"

	"github.com/fpga-faas/faas/internal/testenv"
	"github.com/fpga-faas/faas/sdk/alidnn"
	"github.com/fpga-faas/faas/sdk/alidnn/classify"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/sdk/faas/replay"
	"github.com/fpga-faas/faas/sdk/faas/tracefile"
	"github.com/fpga-faas/faas/sdk/onnx"
)

// TestTraceReplayMNIST: a session classifying the MNIST digits is recorded
// on slot 0 and replays bit-identically on slot 1, over the network too; a
// trace that was altered, cut or made on another role version is refused,
// and a changed input shows as a mismatch.
func TestTraceReplayMNIST(t *testing.T) {
	ctx := context.Background()
	dir := testenv.TestData(t, "onnx", "models", "mnist")
	a := startSessAgent(t, sessOptions{tls: true})
	m, err := onnx.ReadModel(filepath.Join(dir, "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	prog, err := alidnn.Compile(m)
	if err != nil {
		t.Fatal(err)
	}
	cases, err := classify.ReadCases(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := faas.Dial(ctx, a.socket, faas.WithToken(tenantToken("alice")))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	slot0, err := c.Slot(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}

	var file bytes.Buffer
	w, err := tracefile.NewWriter(&file, tracefile.Header{Tenant: "alice", Slot: 0, BoardModel: slot0.BoardModel,
		Role: slot0.Role.Name, RoleVersion: slot0.Role.Version})
	if err != nil {
		t.Fatal(err)
	}
	dev := openDevice(t, a.socket, "alice", 0)
	dev.Record(w)
	s, err := alidnn.Open(ctx, alidnn.Agent(dev), prog)
	if err != nil {
		t.Fatal(err)
	}
	out, err := classify.Run(ctx, s, prog, cases, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := classify.Check(out); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	tr, err := tracefile.Read(bytes.NewReader(file.Bytes()), 0)
	if err != nil {
		t.Fatal(err)
	}

	tlsOpts := faas.WithTLSConfig(&tls.Config{RootCAs: a.roots, MinVersion: tls.VersionTLS13})
	for _, target := range []struct {
		name string
		dev  *faas.Device
	}{
		{"local slot 1", openDevice(t, a.socket, "alice", 1)},
		{"remote slot 1", openDevice(t, "https://"+a.tcp, "alice", 1, tlsOpts)},
	} {
		slot1, _ := c.Slot(ctx, 1)
		if err := replay.Compatible(tr.Header, slot1); err != nil {
			t.Fatal(err)
		}
		rep, err := replay.Run(ctx, target.dev, tr)
		if err != nil {
			t.Fatalf("%s: %v", target.name, err)
		}
		if !rep.Identical() || rep.Jobs == 0 || rep.Reads == 0 || rep.RecordedCycles != rep.ReplayedCycles {
			t.Fatalf("%s: replay %+v", target.name, rep)
		}
		t.Logf("%s: %d jobs and %d reads identical, %d cycles", target.name, rep.Jobs, rep.Reads, rep.ReplayedCycles)
	}

	// Altered or cut: refused.
	for name, data := range map[string][]byte{
		"altered": func() []byte { b := bytes.Clone(file.Bytes()); b[len(b)/2] ^= 1; return b }(),
		"cut":     file.Bytes()[:file.Len()-40],
	} {
		if _, err := tracefile.Parse(data); !errors.Is(err, tracefile.ErrFormat) {
			t.Errorf("%s trace: %v, want ErrFormat", name, err)
		}
	}
	// Another role version: refused.
	h := tr.Header
	h.RoleVersion = "9.0"
	if err := replay.Compatible(h, slot0); !errors.Is(err, replay.ErrIncompatible) {
		t.Errorf("role 9.0 on slot 0: %v, want ErrIncompatible", err)
	}
	// Changed inputs (every write after the first job, which holds the
	// later runs' digits): the results differ, and the report says where.
	submitted := false
	for i, r := range tr.Records {
		submitted = submitted || r.Kind == tracefile.KindSubmit
		if submitted && r.Kind == tracefile.KindWrite {
			d := bytes.Clone(r.Data)
			for k := range d {
				d[k] ^= 0x40
			}
			tr.Records[i].Data = d
		}
	}
	rep, err := replay.Run(ctx, openDevice(t, a.socket, "alice", 1), tr)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Identical() || len(rep.Mismatches) == 0 {
		t.Fatalf("a changed input replayed identically: %+v", rep)
	}
}
