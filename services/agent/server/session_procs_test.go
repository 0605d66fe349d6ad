package server_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/bitstreams/alidnn/isa"
	"github.com/fpga-faas/faas/sdk/agentapi"
	"github.com/fpga-faas/faas/sdk/agentapi/session"
	"github.com/fpga-faas/faas/sdk/faas"
	"github.com/fpga-faas/faas/services/agent/server"
	"github.com/fpga-faas/faas/services/agent/sessions"
)

// Tenant processes: the multi-process tests re-run this test binary as
// TestHelperTenant with FAAS_SESSION_CHILD naming the part to play, so
// tenants are separate processes with their own address spaces, and a
// kill -9 is a real crash. A child talks on stdout in lines: READY …,
// then OK … or FAIL ….

const childEnv = "FAAS_SESSION_CHILD"

type child struct {
	t     testing.TB
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	errb  bytes.Buffer
	done  chan error
}

func startChild(t testing.TB, mode, socket, tenant string, slot int, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTenant$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "FAAS_SESSION_SOCKET="+socket,
		"FAAS_SESSION_TENANT="+tenant, "FAAS_SESSION_SLOT="+strconv.Itoa(slot))
	cmd.Env = append(cmd.Env, env...)
	c := &child{t: t, cmd: cmd, lines: make(chan string, 16), done: make(chan error, 1)}
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &c.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range c.lines {
		}
	})
	return c
}

// expect returns the fields of the child's next line starting with prefix.
func (c *child) expect(prefix string, timeout time.Duration) []string {
	c.t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-c.lines:
			if !ok {
				c.t.Fatalf("child %s exited before %s; stderr:\n%s", c.cmd.Env[len(os.Environ())], prefix, c.errb.String())
			}
			if strings.HasPrefix(l, "FAIL") {
				c.t.Fatalf("child: %s", l)
			}
			if strings.HasPrefix(l, prefix) {
				return strings.Fields(l)[1:]
			}
		case <-deadline:
			c.t.Fatalf("no %s from the child within %v", prefix, timeout)
		}
	}
}

func (c *child) say(line string) {
	c.t.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		c.t.Fatal(err)
	}
}

// TestHelperTenant is the body of the tenant processes; it does nothing in
// an ordinary run.
func TestHelperTenant(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("helper process of the multi-process tests")
	}
	socket, tenant := os.Getenv("FAAS_SESSION_SOCKET"), os.Getenv("FAAS_SESSION_TENANT")
	slot, _ := strconv.Atoi(os.Getenv("FAAS_SESSION_SLOT"))
	var err error
	switch mode {
	case "victim":
		err = childVictim(socket, tenant, slot)
	case "busy":
		err = childBusy(socket, tenant, slot)
	case "load":
		err = childLoad(socket, tenant, slot)
	case "mnist":
		err = childMNIST(socket, tenant, slot)
	case "agent":
		// The agent of the benchmarks, in a process of its own as faasd
		// is; it serves until the parent closes stdin.
		a := startSessAgent(t, sessOptions{ddr: 512 << 20})
		fmt.Println("READY", a.socket)
		io.Copy(io.Discard, os.Stdin)
		return
	default:
		err = fmt.Errorf("unknown part %q", mode)
	}
	if err != nil {
		fmt.Println("FAIL", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func pattern(seed uint64, n int) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}).Read(b)
	return b
}

// childVictim holds data in a buffer, tells the test its handles and
// address, and on "CHECK" verifies its data and runs its program again.
func childVictim(socket, tenant string, slot int) error {
	r, err := tryRaw(socket, tenant, slot)
	if err != nil {
		return err
	}
	const size = 1 << 20
	buf, err := r.alloc(size)
	if err != nil {
		return err
	}
	want := pattern(1, size)
	if code, _, err := r.code(session.OpWrite, append(session.U64s(buf.Handle, 0), want...)); err != nil || code != "" {
		return fmt.Errorf("write: %v %s", err, code)
	}
	insns, err := isa.Assemble(fmt.Sprintf("load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=7", buf.Addr))
	if err != nil {
		return err
	}
	prog, code, err := r.program(insns)
	if err != nil || code != "" {
		return fmt.Errorf("program: %v %s", err, code)
	}
	runOK := func(id uint64) error {
		c, err := r.run(context.Background(), prog, id)
		if err != nil {
			return err
		}
		if c.Kind != session.Done || c.Stats.JobID != 7 {
			return fmt.Errorf("job %d: %+v", id, c)
		}
		return nil
	}
	if err := runOK(1); err != nil {
		return err
	}
	fmt.Println("READY", buf.Handle, buf.Addr, buf.Size, prog)
	if l, _ := bufio.NewReader(os.Stdin).ReadString('\n'); strings.TrimSpace(l) != "CHECK" {
		return fmt.Errorf("told %q", l)
	}
	for off := 0; off < size; off += session.MaxData {
		n := min(size-off, session.MaxData)
		code, got, err := r.code(session.OpRead, session.U64s(buf.Handle, uint64(off), uint64(n)))
		if err != nil || code != "" {
			return fmt.Errorf("read: %v %s", err, code)
		}
		if !bytes.Equal(got, want[off:off+n]) {
			return errors.New("the buffer's data changed")
		}
	}
	if err := runOK(2); err != nil {
		return err
	}
	fmt.Println("INTACT")
	return nil
}

// TestSessionIsolation: a victim process holds data on the chip; another
// tenant, knowing the victim's handles and addresses, tries every way in
// that the protocol allows. Each is refused, and the victim's data and
// program are unchanged.
func TestSessionIsolation(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	v := startChild(t, "victim", a.socket, "alice", 0)
	f := v.expect("READY", 30*time.Second)
	num := func(i int) uint64 {
		n, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	vh, vaddr, vsize, vprog := num(0), num(1), num(2), num(3)

	m := dialRaw(t, a.socket, "mallory", 0)
	own, err := m.alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	freed, err := m.alloc(4096)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := m.code(session.OpFree, session.U64s(freed.Handle)); err != nil || code != "" {
		t.Fatalf("free: %v %s", err, code)
	}
	for _, at := range []struct {
		name string
		op   session.Op
		body []byte
		want agentapi.Code
	}{
		{"write with the victim's handle", session.OpWrite, append(session.U64s(vh, 0), make([]byte, 64)...), agentapi.CodeBadHandle},
		{"read with the victim's handle", session.OpRead, session.U64s(vh, 0, 64), agentapi.CodeBadHandle},
		{"free the victim's buffer", session.OpFree, session.U64s(vh), agentapi.CodeBadHandle},
		{"free the victim's program", session.OpFree, session.U64s(vprog), agentapi.CodeBadHandle},
		{"sync with the victim's handle", session.OpSync, session.SyncRequest{Handle: vh, Len: 64}.Marshal(), agentapi.CodeBadHandle},
		{"forged handle", session.OpWrite, append(session.U64s(0x5eed5eed5eed5eed, 0), make([]byte, 64)...), agentapi.CodeBadHandle},
		{"handle reused after free", session.OpWrite, append(session.U64s(freed.Handle, 0), make([]byte, 64)...), agentapi.CodeBadHandle},
		{"read after free", session.OpRead, session.U64s(freed.Handle, 0, 64), agentapi.CodeBadHandle},
		{"write past its own buffer", session.OpWrite, append(session.U64s(own.Handle, own.Size), make([]byte, 64)...), agentapi.CodeOutOfRange},
		{"read past its own buffer", session.OpRead, session.U64s(own.Handle, own.Size-32, 64), agentapi.CodeOutOfRange},
		{"load from the victim's buffer", session.OpProgram, encode(t, asm(t, "load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", vaddr)), agentapi.CodeRefused},
		{"load the victim's last bytes", session.OpProgram, encode(t, asm(t, "load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", vaddr+vsize-16)), agentapi.CodeRefused},
		{"store into the victim's buffer", session.OpProgram, encode(t, asm(t, "store.acc int32 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", vaddr)), agentapi.CodeRefused},
		{"load running off its own buffer", session.OpProgram, encode(t, asm(t, "load.inp int8 sram=0 dram=%#x y=4 x=1 stride=1\nfinish job=1", own.Addr+own.Size-16)), agentapi.CodeRefused},
		{"load from a freed buffer", session.OpProgram, encode(t, asm(t, "load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", freed.Addr)), agentapi.CodeRefused},
		{"load from address 0", session.OpProgram, encode(t, asm(t, "load.uop int32 sram=0 dram=0x0 y=1 x=1 stride=1\nfinish job=1")), agentapi.CodeRefused},
		{"load from the top of DDR", session.OpProgram, encode(t, asm(t, "load.inp int8 sram=0 dram=%#x y=1 x=1 stride=1\nfinish job=1", uint64(64<<20)-16)), agentapi.CodeRefused},
	} {
		code, _, err := m.code(at.op, at.body)
		if err != nil {
			t.Fatalf("%s: %v", at.name, err)
		}
		if code != at.want {
			t.Errorf("%s: answered %q, want %q", at.name, code, at.want)
		}
	}
	// Running the victim's program is refused as its job's outcome.
	c, err := m.run(context.Background(), vprog, 99)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != session.Failed || c.Code != agentapi.CodeBadHandle {
		t.Errorf("job of the victim's program: %+v", c)
	}
	// The attacker's session still works for its own buffer.
	if code, _, err := m.code(session.OpWrite, append(session.U64s(own.Handle, 0), make([]byte, 64)...)); err != nil || code != "" {
		t.Errorf("own write: %v %s", err, code)
	}
	v.say("CHECK")
	v.expect("INTACT", 30*time.Second)
}

func encode(t testing.TB, insns []isa.Insn) []byte {
	t.Helper()
	b, err := session.EncodeProgram(insns)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// nopProgram is n NOPs and a FINISH with job: n+1 instructions, a length
// (and FINISH id) that tells whose program a completion is of.
func nopProgram(n int, job uint32) []isa.Insn {
	p := make([]isa.Insn, 0, n+1)
	for range n {
		p = append(p, isa.Insn{Op: isa.OpNop, NopQueue: isa.QueueCompute})
	}
	return append(p, isa.Insn{Op: isa.OpFinish, JobID: job})
}

// childBusy fills its quota with 1 MiB buffers, reports how many fit, and
// runs long jobs back to back until it is killed.
func childBusy(socket, tenant string, slot int) error {
	ctx := context.Background()
	c, err := faas.Dial(ctx, socket, faas.WithToken(tenantToken(tenant)))
	if err != nil {
		return err
	}
	d, err := c.Open(ctx, slot)
	if err != nil {
		return err
	}
	n := 0
	for {
		b, err := d.Alloc(ctx, 1<<20)
		if errors.Is(err, faas.ErrQuota) {
			break
		}
		if err != nil {
			return err
		}
		if err := b.Write(ctx, pattern(uint64(n), 1<<20), 0); err != nil {
			return err
		}
		n++
	}
	p, err := d.Program(ctx, nopProgram(2000, 5))
	if err != nil {
		return err
	}
	var jobs []*faas.Job
	for i := 0; ; i++ {
		for len(jobs) < 16 {
			j, err := d.Queue().Submit(ctx, p)
			if err != nil {
				return err
			}
			jobs = append(jobs, j)
		}
		if _, err := jobs[0].Wait(ctx); err != nil {
			return err
		}
		jobs = jobs[1:]
		if i == 20 {
			fmt.Println("READY", n)
		}
	}
}

// usageOf is tenant's accounting on slot's session engine.
func usageOf(srv *server.Server, slot int, tenant string) sessions.Usage {
	for _, u := range srv.SessionUsage(slot) {
		if u.Tenant == tenant {
			return u
		}
	}
	return sessions.Usage{Tenant: tenant}
}

// TestSessionKilledMidJob: a tenant process with its whole quota allocated
// and jobs running is killed with SIGKILL. Its memory and queue are freed
// (the engine's accounting shows it, and a new session gets the whole quota
// again), while another tenant's jobs run on, correct, throughout.
func TestSessionKilledMidJob(t *testing.T) {
	a := startSessAgent(t, sessOptions{})
	ctx := context.Background()

	// Alice runs jobs and checks a buffer all along.
	d := openDevice(t, a.socket, "alice", 0)
	buf, err := d.Alloc(ctx, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	want := pattern(42, 64<<10)
	if err := buf.Write(ctx, want, 0); err != nil {
		t.Fatal(err)
	}
	p, err := d.Program(ctx, nopProgram(3, 11))
	if err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int64
	stop := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		got := make([]byte, len(want))
		for i := 0; ; i++ {
			select {
			case <-stop:
				errc <- nil
				return
			default:
			}
			j, err := d.Queue().Submit(ctx, p)
			if err != nil {
				errc <- err
				return
			}
			st, err := j.Wait(ctx)
			if err != nil || st.Insns != 4 || st.JobID != 11 {
				errc <- fmt.Errorf("alice's job %d: %+v, %v", i, st, err)
				return
			}
			if i%50 == 0 {
				if err := buf.Read(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
					errc <- fmt.Errorf("alice's buffer: %v", err)
					return
				}
			}
			ran.Add(1)
		}
	}()

	v := startChild(t, "busy", a.socket, "carol", 0)
	f := v.expect("READY", 60*time.Second)
	nbuf, _ := strconv.Atoi(f[0])
	if nbuf == 0 {
		t.Fatal("carol could not allocate a single MiB")
	}
	t.Logf("carol holds %d MiB", nbuf)
	if u := usageOf(a.srv, 0, "carol"); u.Memory < uint64(nbuf)<<20 || u.Sessions != 1 {
		t.Fatalf("carol's usage while running: %+v", u)
	}
	jobsBefore := usageOf(a.srv, 0, "carol").Jobs
	if err := v.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-v.done
	aliceAtKill := ran.Load()
	deadline := time.Now().Add(10 * time.Second)
	for {
		u := usageOf(a.srv, 0, "carol")
		if u.Memory == 0 && u.Sessions == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("carol's session outlived her process: %+v", u)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if u := usageOf(a.srv, 0, "carol"); u.Jobs < jobsBefore {
		t.Errorf("carol's job count went back: %+v", u)
	}
	// Carol, back, gets her whole quota again.
	cd := openDevice(t, a.socket, "carol", 0)
	for i := range nbuf {
		if _, err := cd.Alloc(ctx, 1<<20); err != nil {
			t.Fatalf("carol's buffer %d of %d after the kill: %v", i+1, nbuf, err)
		}
	}
	if _, err := cd.Alloc(ctx, 1<<20); !errors.Is(err, faas.ErrQuota) {
		t.Errorf("carol beyond her quota: %v, want ErrQuota", err)
	}
	for ran.Load() < aliceAtKill+100 {
		select {
		case err := <-errc:
			t.Fatal(err)
		case <-time.After(time.Millisecond):
		}
	}
	close(stop)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// childLoad runs JOBS jobs of four programs of its own (lengths and FINISH
// ids no other child uses), up to 64 in flight, and checks every
// completion's counters against the program it submitted; every 500 jobs it
// writes, reads back and frees a buffer of a random size.
func childLoad(socket, tenant string, slot int) error {
	ctx := context.Background()
	seed, _ := strconv.Atoi(os.Getenv("FAAS_SESSION_SEED"))
	jobs, _ := strconv.Atoi(os.Getenv("FAAS_SESSION_JOBS"))
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	c, err := faas.Dial(ctx, socket, faas.WithToken(tenantToken(tenant)))
	if err != nil {
		return err
	}
	d, err := c.Open(ctx, slot)
	if err != nil {
		return err
	}
	type prog struct {
		p     *faas.Program
		insns uint32
		id    uint32
	}
	var progs []prog
	for k := range 4 {
		n, id := seed*4+k, uint32(seed*100+k)
		p, err := d.Program(ctx, nopProgram(n, id))
		if err != nil {
			return err
		}
		progs = append(progs, prog{p, uint32(n + 1), id})
	}
	type inflight struct {
		j *faas.Job
		p prog
	}
	var q []inflight
	seen := map[uint64]bool{}
	waitOne := func() error {
		f := q[0]
		q = q[1:]
		st, err := f.j.Wait(ctx)
		if err != nil {
			return fmt.Errorf("job %d: %w", f.j.ID(), err)
		}
		if st.Insns != f.p.insns || st.JobID != f.p.id {
			return fmt.Errorf("job %d of a %d-instruction program (FINISH %d) completed with %+v", f.j.ID(), f.p.insns, f.p.id, st)
		}
		if seen[f.j.ID()] {
			return fmt.Errorf("job id %d twice", f.j.ID())
		}
		seen[f.j.ID()] = true
		return nil
	}
	for i := range jobs {
		if i%500 == 0 {
			size := 64 + rng.Int64N(1<<20)
			b, err := d.Alloc(ctx, size)
			if err != nil {
				return err
			}
			want := pattern(uint64(seed*jobs+i), int(size))
			got := make([]byte, size)
			if err := b.Write(ctx, want, 0); err != nil {
				return err
			}
			if err := b.Read(ctx, got, 0); err != nil {
				return err
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("buffer of %d bytes read back differs", size)
			}
			if err := b.Free(ctx); err != nil {
				return err
			}
		}
		p := progs[rng.IntN(len(progs))]
		j, err := d.Queue().Submit(ctx, p.p)
		if err != nil {
			return err
		}
		q = append(q, inflight{j, p})
		if len(q) >= 1+rng.IntN(64) {
			if err := waitOne(); err != nil {
				return err
			}
		}
	}
	for len(q) > 0 {
		if err := waitOne(); err != nil {
			return err
		}
	}
	if len(seen) != jobs {
		return fmt.Errorf("%d distinct completions of %d jobs", len(seen), jobs)
	}
	fmt.Println("OK", jobs)
	return d.Close()
}

// TestSessionLoad runs 8 tenant processes × 10,000 jobs (1,000 with
// -short) on the two AliDNN slots (a chip has 7 tenant windows). Every job
// completes once, in its own process, with the counters of its own
// program; the engines ran exactly as many jobs per tenant as submitted.
func TestSessionLoad(t *testing.T) {
	jobs := 10000
	if testing.Short() {
		jobs = 1000
	}
	a := startSessAgent(t, sessOptions{})
	const procs = 8
	var kids []*child
	for i := range procs {
		kids = append(kids, startChild(t, "load", a.socket, fmt.Sprintf("t%d", i), i%2,
			"FAAS_SESSION_SEED="+strconv.Itoa(i), "FAAS_SESSION_JOBS="+strconv.Itoa(jobs)))
	}
	var wg sync.WaitGroup
	for _, k := range kids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case l := <-k.lines:
				if l != fmt.Sprintf("OK %d", jobs) {
					t.Errorf("child: %s %s", l, k.errb.String())
				}
			case <-time.After(5 * time.Minute):
				t.Error("child timed out")
			}
		}()
	}
	wg.Wait()
	for _, k := range kids {
		if err := <-k.done; err != nil {
			t.Errorf("child: %v; stderr:\n%s", err, k.errb.String())
		}
	}
	for i := range procs {
		if u := usageOf(a.srv, i%2, fmt.Sprintf("t%d", i)); u.Jobs != uint64(jobs) {
			t.Errorf("tenant t%d: the engine ran %d jobs, want %d", i, u.Jobs, jobs)
		}
	}
}
