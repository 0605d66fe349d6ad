package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pollInterval is how often readiness is probed while a server starts.
const pollInterval = 50 * time.Millisecond

// startAttempts bounds how often a server is restarted on a new port when
// the random port chosen for it was taken in the meantime.
const startAttempts = 3

// inCI reports whether the environment variable CI is set to a true value.
func inCI() bool {
	ci, err := strconv.ParseBool(os.Getenv("CI"))
	return err == nil && ci
}

// missing reports a missing dependency: a failure under CI, a skip otherwise.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if inCI() {
		t.Fatalf("testenv: %s (CI=%s: a missing dependency is a failure)", msg, os.Getenv("CI"))
	}
	t.Skipf("testenv: skipping: %s (with CI=true this is a failure)", msg)
}

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// portTaken reports whether a server log says its port was taken.
func portTaken(log string) bool {
	l := strings.ToLower(log)
	return strings.Contains(l, "already in use") || strings.Contains(l, "could not bind")
}

// cleanEnv returns the environment without variables whose names start with
// one of the prefixes, plus extra.
func cleanEnv(prefixes []string, extra ...string) []string {
	var env []string
next:
	for _, kv := range os.Environ() {
		for _, p := range prefixes {
			if strings.HasPrefix(kv, p) {
				continue next
			}
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// logTail returns the last lines of the log file at path, for error messages.
func logTail(path string) string {
	const max = 4 << 10
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		b = append([]byte("...\n"), b...)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return "(log is empty)"
	}
	return string(b)
}

// proc is a server process running in its own process group, with stdout and
// stderr appended to a log file.
type proc struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	done   chan struct{} // closed when the process has exited
	err    error         // the result of Wait, valid once done is closed
}

// command prepares bin with args to run in dir with env, as cred if not nil,
// in its own process group, killed with the group when ctx ends or when the
// test binary dies, output appended to logPath.
func command(ctx context.Context, logPath string, cred *syscall.Credential, dir string, env []string, bin string, args ...string) (*exec.Cmd, *os.File, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(logf, "\n### %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
		Credential: cred,
	}
	cmd.Cancel = func() error { return killGroup(cmd) }
	return cmd, logf, nil
}

// run runs a short-lived command to completion with a timeout.
func run(timeout time.Duration, logPath string, cred *syscall.Credential, dir string, env []string, bin string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd, logf, err := command(ctx, logPath, cred, dir, env, bin, args...)
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("%s: timed out after %v", bin, timeout)
		}
		return fmt.Errorf("%s: %w", bin, err)
	}
	return nil
}

// start starts a long-running server process.
func start(logPath string, cred *syscall.Credential, dir string, env []string, bin string, args ...string) (*proc, error) {
	ctx, cancel := context.WithCancel(context.Background())
	cmd, logf, err := command(ctx, logPath, cred, dir, env, bin, args...)
	if err != nil {
		cancel()
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	p := &proc{cmd: cmd, cancel: cancel, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill kills the process group and waits for the process to exit.
func (p *proc) kill() {
	p.cancel()
	_ = killGroup(p.cmd) // also reaches children left behind by an exited leader
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
	}
}

func killGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// waitReady polls ready every pollInterval until it succeeds, the process
// exits or the deadline passes.
func waitReady(p *proc, timeout time.Duration, ready func(context.Context) error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if p.exited() {
			return fmt.Errorf("exited before it was ready: %v", p.err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		last = ready(ctx)
		cancel()
		if last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %v", timeout, last)
		}
		time.Sleep(pollInterval)
	}
}
