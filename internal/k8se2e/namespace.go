package k8se2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// inNamespace is set in the environment of the test binary re-run inside
// the harness's namespaces.
const inNamespace = "FAAS_K8S_E2E_IN_NAMESPACE"

// hostDirs are the fixed paths the kubelet writes; inside the mount
// namespace each is a bind mount of a directory of the run, so nothing
// the kubelet writes there reaches the host.
var hostDirs = []struct{ host, run string }{
	{KubeletDir, "var-lib-kubelet"},
	{"/var/log/pods", "var-log-pods"},
	{"/var/log/containers", "var-log-containers"},
	// libmount's table (utab), which the kubelet's mount(8) calls write.
	{"/run/mount", "run-mount"},
}

// Main runs the tests (m.Run) inside a new network and mount namespace:
// the first call re-runs the test binary under unshare(1) and returns its
// exit code; inside, it sets up the network (loopback and a veth pair
// with NodeIP, no route anywhere else) and the bind mounts over
// the kubelet's paths, then runs the tests. dir is the run's directory.
func Main(m interface{ Run() int }, dir string) int {
	if os.Getenv(inNamespace) == "" {
		code, err := reexec(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, "k8s e2e:", err)
			return 2
		}
		return code
	}
	if err := setupNamespace(dir); err != nil {
		fmt.Fprintln(os.Stderr, "k8s e2e: namespace:", err)
		return 2
	}
	return m.Run()
}

// reexec runs this binary again in new namespaces. The mount points must
// exist on the host; those it creates it removes afterwards (they stay
// empty on the host: the mounts live in the namespace only).
func reexec(dir string) (int, error) {
	if os.Geteuid() != 0 {
		return 0, errors.New("needs root: it makes a network and a mount namespace and runs the kubelet")
	}
	var made []string
	defer func() {
		for i := len(made) - 1; i >= 0; i-- {
			os.Remove(made[i])
		}
	}()
	for _, d := range hostDirs {
		if _, err := os.Stat(d.host); errors.Is(err, fs.ErrNotExist) {
			if err := os.Mkdir(d.host, 0o755); err != nil {
				return 0, err
			}
			made = append(made, d.host)
		}
		if err := os.MkdirAll(filepath.Join(dir, d.run), 0o755); err != nil {
			return 0, err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command("unshare", append([]string{"--net", "--mount", "--propagation", "private", "--", exe}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNamespace+"=1")
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, fmt.Errorf("unshare (util-linux): %w", err)
	}
	return 0, nil
}

func setupNamespace(dir string) error {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		// A veth pair with both ends here (not every kernel has the dummy
		// driver): the node's interface, and a peer so that it has carrier.
		{"link", "add", "faas0", "type", "veth", "peer", "name", "faas1"},
		{"addr", "add", NodeIP + "/24", "dev", "faas0"},
		{"link", "set", "faas1", "up"},
		{"link", "set", "faas0", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	for _, d := range hostDirs {
		if err := syscall.Mount(filepath.Join(dir, d.run), d.host, "", syscall.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s: %w", d.host, err)
		}
	}
	return nil
}
