package k8se2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a component has to exit after SIGTERM before it
// is killed.
const stopGrace = 15 * time.Second

// proc is one component of the cluster running as a child process, its
// output appended to logs/NAME.log (kept across restarts, so a test's
// failure message can point at one file).
type proc struct {
	name, bin string
	args, env []string
	log       string
	cmd       *exec.Cmd
	done      chan struct{}
	err       error
}

func newProc(logDir, name, bin string, args ...string) *proc {
	return &proc{name: name, bin: bin, args: args, log: filepath.Join(logDir, name+".log")}
}

// start starts the process (again, after stop).
func (p *proc) start() error {
	out, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "=== %s start %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), p.bin, strings.Join(p.args, " "))
	// An empty working directory of the run's, never the test's (the
	// package's sources): a component that cleans up relative paths
	// cleans up there.
	cwd := filepath.Join(filepath.Dir(filepath.Dir(p.log)), "cwd")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		out.Close()
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = cwd
	cmd.Stdout, cmd.Stderr = out, out
	cmd.Env = append(os.Environ(), p.env...)
	// Its own process group, so that a Ctrl-C of the test reaches the
	// component through our stop and not twice.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		out.Close()
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.cmd, p.done, p.err = cmd, make(chan struct{}), nil
	go func(done chan struct{}) {
		p.err = cmd.Wait()
		out.Close()
		close(done)
	}(p.done)
	return nil
}

// running reports whether the process has been started and not exited.
func (p *proc) running() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and waits, then kills.
func (p *proc) stop() {
	if !p.running() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// exitErr says how the process ended, for a test that finds it gone.
func (p *proc) exitErr() error {
	if p.running() {
		return nil
	}
	if p.err == nil {
		return fmt.Errorf("%s exited (log %s)", p.name, p.log)
	}
	return fmt.Errorf("%s: %w (log %s)", p.name, p.err, p.log)
}

// poll calls cond every 250 ms until it returns true, an error, ctx ends
// or what, a process the condition needs, exits.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error), needs ...*proc) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		for _, p := range needs {
			if err := p.exitErr(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var errNotYet = errors.New("not yet")
