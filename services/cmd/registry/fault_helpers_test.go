package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fpga-faas/faas/sdk/registryclient"
)

// childEnv makes the test binary run the registry's main instead of the
// tests: the fault tests start the registry as a real subprocess (the test
// binary re-executed) and SIGKILL it.
const childEnv = "FAAS_REGISTRY_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Generous bounds: the tests run under -race on loaded 2-core machines.
const (
	startTimeout = 3 * time.Minute
	opTimeout    = 2 * time.Minute
	pollEvery    = 20 * time.Millisecond
)

// lockedBuffer is a goroutine-safe buffer.
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

// registryEnv is one registry installation (database, data directory, blob
// store) that registry processes are started on, killed and restarted.
type registryEnv struct {
	t       *testing.T
	env     []string // FAAS_* settings
	dataDir string
	dbURL   string
	logs    *lockedBuffer // stderr of every process, in order
	gen     int
	// serveArgs are added to every `registry serve`.
	serveArgs []string
}

func newRegistryEnv(t *testing.T, dbURL, dataDir string, extra ...string) *registryEnv {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "FAAS_") {
			env = append(env, kv)
		}
	}
	env = append(env, childEnv+"=1", "FAAS_DATABASE_URL="+dbURL, "FAAS_DATA_DIR="+dataDir)
	env = append(env, extra...)
	e := &registryEnv{t: t, env: env, dataDir: dataDir, dbURL: dbURL, logs: &lockedBuffer{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("registry logs:\n%s", e.logs.String())
		}
	})
	return e
}

// usersAdd runs `registry users add NAME --role ROLE` with the password on
// stdin.
func (e *registryEnv) usersAdd(name, role, password string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "users", "add", name, "--role", role)
	cmd.Env = e.env
	cmd.Stdin = strings.NewReader(password + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "created "+role+" account "+name) {
		e.t.Fatalf("registry users add %s: %v\n%s", name, err, out)
	}
}

// proc is one running registry process.
type proc struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:port
	host   string // 127.0.0.1:port
	done   chan struct{}
	killed bool
}

// stdoutWatch collects stdout and reports the listening line.
type stdoutWatch struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	found bool
	url   chan string
}

var listeningRE = regexp.MustCompile(`registry listening on (\S+)\n`)

func (w *stdoutWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.found {
		if m := listeningRE.FindSubmatch(w.buf.Bytes()); m != nil {
			w.found = true
			w.url <- string(m[1])
		}
	}
	return len(p), nil
}

// start starts `registry serve` and waits for its listening line.
func (e *registryEnv) start() *proc {
	e.t.Helper()
	e.gen++
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--metrics-listen", "off", "--log-level", "debug"}, e.serveArgs...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = e.env
	watch := &stdoutWatch{url: make(chan string, 1)}
	cmd.Stdout = watch
	fmt.Fprintf(e.logs, "=== registry process %d\n", e.gen)
	cmd.Stderr = e.logs
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case u := <-watch.url:
		p.url = u
		p.host = strings.TrimPrefix(u, "http://")
	case <-p.done:
		e.t.Fatalf("registry exited before listening: %v", cmd.ProcessState)
	case <-time.After(startTimeout):
		e.t.Fatal("registry did not print its listening line")
	}
	return p
}

// kill SIGKILLs the process and waits until it is gone.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(opTimeout):
		t.Fatal("registry did not die")
	}
	p.killed = true
}

// checkNoRace fails the test when a process reported a data race (the
// child is the test binary, built with -race when the tests are).
func (e *registryEnv) checkNoRace() {
	if strings.Contains(e.logs.String(), "WARNING: DATA RACE") {
		e.t.Error("a registry process reported a data race")
	}
}

// poll calls cond until it returns true, failing after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(pollEvery)
	}
}

var httpClient = &http.Client{Timeout: opTimeout}

// request does one HTTP request and reads the whole answer.
func request(ctx context.Context, method, url string, hdr http.Header, body []byte) (*http.Response, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, nil, err
	}
	for k, vs := range hdr {
		req.Header[k] = vs
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// token gets a registry access token for scope with Basic credentials.
func token(t *testing.T, ctx context.Context, base, user, password, scope string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/auth/token?service=faas-registry&scope="+scope, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(user, password)
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tr struct {
		Token string `json:"token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tr); err != nil || resp.StatusCode != 200 || tr.Token == "" {
		t.Fatalf("token: %d %v", resp.StatusCode, err)
	}
	return tr.Token
}

// isvAPI is a client of the registry's API at base as the fault tests'
// ISV.
func isvAPI(base string) (*registryclient.Client, error) {
	return registryclient.New(base, registryclient.WithBasicAuth(faultISV, faultISVPW), registryclient.WithHTTPClient(httpClient))
}

// mustISVAPI is isvAPI failing t.
func mustISVAPI(t *testing.T, base string) *registryclient.Client {
	t.Helper()
	c, err := isvAPI(base)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
