package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// MinIOModule is the pinned MinIO server that `make tools` installs; the
// Makefile pins the same version (checked by a test).
const MinIOModule = "github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c"

// minioReadyTimeout bounds how long a new server may take to become ready.
const minioReadyTimeout = 60 * time.Second

// S3 is a running throwaway MinIO server.
type S3 struct {
	Endpoint    string // host:port, as minio-go's New wants it
	URL         string // http://host:port
	AccessKey   string // the root user, random per server
	SecretKey   string // the root password, random per server
	Region      string // us-east-1
	ConsoleAddr string // host:port of the web console
	DataDir     string
}

const minioInstall = "install it with `make tools` or `go install " + MinIOModule + "` (about 4 minutes the first time), " +
	"or set FAAS_MINIO_BIN to the minio executable"

// minioBin finds the minio server executable.
func minioBin() (string, error) {
	isExec := func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
	}
	if p := os.Getenv("FAAS_MINIO_BIN"); p != "" {
		if isExec(p) {
			return p, nil
		}
		return "", fmt.Errorf("minio server not found at FAAS_MINIO_BIN=%s; %s", p, minioInstall)
	}
	var tried []string
	for _, dir := range goBinDirs() {
		p := filepath.Join(dir, "minio")
		if isExec(p) {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("minio server not found at %s or in PATH; %s", strings.Join(tried, ", "), minioInstall)
}

// goBinDirs returns where `go install` puts binaries: $GOBIN, else the first
// GOPATH entry's bin directory.
func goBinDirs() []string {
	gobin, gopath := os.Getenv("GOBIN"), os.Getenv("GOPATH")
	if gobin == "" && gopath == "" {
		if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) == 2 {
				gobin, gopath = strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
			}
		}
	}
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	var dirs []string
	if gobin != "" {
		dirs = append(dirs, gobin)
	}
	if list := filepath.SplitList(gopath); len(list) > 0 && list[0] != "" {
		dirs = append(dirs, filepath.Join(list[0], "bin"))
	}
	return dirs
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never returns an error
	return hex.EncodeToString(b)
}

// MinIO starts a throwaway MinIO server for the test and returns how to reach
// it: S3 API and console each on a random port on 127.0.0.1, random root
// credentials, data in a temporary directory. t.Cleanup kills it and removes
// the directory.
//
// Without the minio binary the test is skipped, or fails when CI=true.
func MinIO(t testing.TB) *S3 {
	t.Helper()
	bin, err := minioBin()
	if err != nil {
		missing(t, "%v", err)
	}

	began := time.Now()
	dir, err := os.MkdirTemp("", "faas-minio-")
	if err != nil {
		t.Fatalf("testenv: minio: %v", err)
	}
	data := filepath.Join(dir, "data")
	logPath := filepath.Join(dir, "minio.log")
	s3 := &S3{
		AccessKey: "faas" + randomHex(8),
		SecretKey: randomHex(20),
		Region:    "us-east-1",
		DataDir:   data,
	}
	env := cleanEnv([]string{"MINIO_"},
		"MINIO_ROOT_USER="+s3.AccessKey,
		"MINIO_ROOT_PASSWORD="+s3.SecretKey,
		"MINIO_REGION="+s3.Region,
		"MINIO_UPDATE=off",
		"HOME="+dir)

	var p *proc
	logShown := false // by fail, so that cleanup does not repeat it
	t.Cleanup(func() {
		if t.Failed() && !logShown {
			t.Logf("testenv: minio log (%s):\n%s", logPath, logTail(logPath))
		}
		if p != nil {
			p.kill()
		}
		os.RemoveAll(dir)
	})
	fail := func(format string, args ...any) {
		t.Helper()
		logShown = true
		t.Fatalf("testenv: minio: %s\nlog %s:\n%s", fmt.Sprintf(format, args...), logPath, logTail(logPath))
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		fail("%v", err)
	}

	client := &http.Client{Timeout: time.Second}
	for attempt := 1; ; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			fail("%v", err)
		}
		s3.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))
		s3.URL = "http://" + s3.Endpoint
		s3.ConsoleAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
		p, err = start(logPath, nil, dir, env, bin, "server",
			"--address", s3.Endpoint, "--console-address", s3.ConsoleAddr,
			"--certs-dir", filepath.Join(dir, "certs"), data)
		if err != nil {
			fail("%v", err)
		}
		err = waitReady(p, minioReadyTimeout, func(ctx context.Context) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, s3.URL+"/minio/health/ready", nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /minio/health/ready: %s", resp.Status)
			}
			return nil
		})
		if err == nil {
			break
		}
		if p.exited() && portTaken(logTail(logPath)) && attempt < startAttempts {
			p.kill()
			continue // a port was taken between choosing and binding it
		}
		fail("server at %s %v", s3.Endpoint, err)
	}
	t.Logf("testenv: minio ready at %s in %v", s3.URL, time.Since(began).Round(time.Millisecond))
	return s3
}
