package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// service is a long-running child process whose output goes to a log file
// and is kept in memory for the lines the demo waits for.
type service struct {
	name    string
	cmd     *exec.Cmd
	log     string
	out     *lockedBuffer
	done    chan struct{}
	stop    os.Signal // the signal that shuts it down cleanly
	cleanup func()    // after it stopped, if set
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// start starts cmd as a service logging to logDir/name.log. The child gets
// SIGKILL if the demo dies without stopping it.
func start(cmd *exec.Cmd, name, logDir string, stop os.Signal) (*service, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	s := &service{name: name, cmd: cmd, log: logPath, out: &lockedBuffer{}, done: make(chan struct{}), stop: stop}
	w := io.MultiWriter(f, s.out)
	cmd.Stdout, cmd.Stderr = w, w
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(s.done)
	}()
	return s, nil
}

func (s *service) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Stop asks the service to stop and kills it if it has not after a while.
func (s *service) Stop() {
	if s.exited() {
		return
	}
	_ = s.cmd.Process.Signal(s.stop)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// tail is the end of the service's output, for error messages.
func (s *service) tail() string { return tail(s.out.String()) }

func tail(s string) string {
	const max = 4 << 10
	if len(s) > max {
		s = "…" + s[len(s)-max:]
	}
	return strings.TrimRight(s, "\n")
}

// poll calls cond every 100 ms until it returns true or an error, the
// service exits, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, what string, s *service, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if s != nil && s.exited() {
			return fmt.Errorf("%s exited (%v) while waiting for %s; its log %s ends:\n%s", s.name, s.cmd.ProcessState, what, s.log, s.tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s", timeout, what)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// runErr is a failed short-lived command.
type runErr struct {
	cmd    string
	err    error
	output string
}

func (e *runErr) Error() string {
	return fmt.Sprintf("%s: %v\n%s", e.cmd, e.err, tail(e.output))
}

func (e *runErr) Unwrap() error { return e.err }

// exitCode is the exit code in err from run, or -1.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}
