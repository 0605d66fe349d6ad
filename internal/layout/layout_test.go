package layout

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// area is a top-level folder of the module and what its packages may import
// in production code.
type area struct {
	name    string
	allowed []target
}

// target is a set of our packages that can be imported.
type target struct {
	name  string // as written in rule messages
	match func(rel string) bool
}

func under(prefix string) target {
	return target{prefix, func(rel string) bool { return within(rel, prefix) }}
}

// within reports whether rel is prefix or below it.
func within(rel, prefix string) bool {
	return rel == prefix || strings.HasPrefix(rel, prefix+"/")
}

// isModel reports whether rel is a role's functional model,
// bitstreams/<role>/model or below it.
func isModel(rel string) bool {
	e := strings.Split(rel, "/")
	return len(e) >= 3 && e[0] == "bitstreams" && e[2] == "model"
}

// isContract reports whether rel is a role's contract: a package under
// bitstreams that is not a functional model.
func isContract(rel string) bool {
	return within(rel, "bitstreams") && !isModel(rel)
}

var (
	shell      = under("shell")
	bitstreams = under("bitstreams")
	hdk        = under("hdk")
	sdk        = under("sdk")
	services   = under("services")
	internal   = under("internal")
	web        = under("web")
	migrations = under("migrations")
	deploy     = under("deploy")
	examples   = under("examples")
	contracts  = target{"role contracts (bitstreams/... but not bitstreams/*/model)", isContract}
	hdkImage   = under("hdk/image")
)

// areas is the import direction of docs/ARCHITECTURE.md ("Layers and packages"), folder by folder.
var areas = []area{
	{"shell", []target{shell}},
	{"bitstreams", []target{shell, bitstreams, internal}},
	{"hdk", []target{shell, bitstreams, hdk, internal}},
	{"sdk", []target{shell, contracts, hdkImage, sdk, internal}},
	{"services", []target{shell, bitstreams, hdk, sdk, services, web, migrations, internal}},
	{"internal", []target{shell, bitstreams, hdk, sdk, web, migrations, internal}},
	{"web", []target{web, internal}},
	{"migrations", []target{migrations, internal}},
	{"deploy", []target{deploy, internal}},
	// Examples are user programs: the public SDK and nothing else.
	{"examples", []target{sdk}},
}

// testOnlyExtra is what imports from _test.go files may reach beyond the
// production rules.
var testOnlyExtra = []target{internal, under("shell/sim"), bitstreams}

func areaOf(rel string) (area, bool) {
	first, _, _ := strings.Cut(rel, "/")
	for _, a := range areas {
		if a.name == first {
			return a, true
		}
	}
	return area{}, false
}

func hasCmd(rel string) bool {
	return slices.Contains(strings.Split(rel, "/"), "cmd")
}

// checkImport reports whether the package importer may import the package
// imported, both given relative to the module path ("shell/sim"); testOnly
// says the import is made only from _test.go files. A forbidden import
// returns the rule it breaks.
func checkImport(importer, imported string, testOnly bool) error {
	if hasCmd(imported) {
		return errors.New("no package imports a cmd package (mains stay thin; move the code into a package)")
	}
	if within(imported, "examples") {
		return errors.New("nothing imports examples: they are programs, their logic lives in the SDK")
	}
	if within(imported, "internal/testenv") && !testOnly {
		return errors.New("internal/testenv is for tests: import it from _test.go files only")
	}
	if within(imported, "services") && !within(importer, "services") {
		return errors.New("nothing outside services imports services (services/cmd/... wires them; end-to-end tests run the binaries)")
	}
	// The device conformance suite is test support: it drives simulated boards
	// with the loopback role like a test does.
	if within(importer, "services/agent") && !testOnly && !within(importer, "services/agent/device/devicetest") {
		if within(imported, "shell/sim") && !within(importer, "services/agent/device/sim") {
			return errors.New("of services/agent only services/agent/device/sim imports shell/sim")
		}
		if isModel(imported) {
			return errors.New("services/agent never imports a role model (bitstreams/*/model), only roles' contracts; the mains wire role models into the simulator")
		}
	}
	// The node agent is a client of the registry like any other: it speaks
	// the contract (sdk/registryapi) through its client, so that faasd
	// links none of the registry's server (echo, pgx, its stores).
	if (within(importer, "services/agent") || importer == "services/cmd/faasd") && within(imported, "services/registry") && !testOnly {
		return errors.New("the node agent never imports services/registry: it uses the registry's contract, sdk/registryapi, and its client")
	}
	// The SDK's mains run an engine in process when no agent is at hand.
	if within(importer, "sdk/cmd") && (within(imported, "shell/sim") || isModel(imported)) {
		return nil
	}
	a, ok := areaOf(importer)
	if !ok {
		return fmt.Errorf("package %q is outside the top-level folders of docs/ARCHITECTURE.md (%s); add its folder and rules to internal/layout", importer, areaNames())
	}
	for _, t := range a.allowed {
		if t.match(imported) {
			return nil
		}
	}
	if testOnly {
		for _, t := range testOnlyExtra {
			if t.match(imported) {
				return nil
			}
		}
	}
	names := make([]string, len(a.allowed))
	for i, t := range a.allowed {
		names[i] = t.name
	}
	rule := fmt.Sprintf("%s/... may import only %s", a.name, strings.Join(names, ", "))
	if a.name == "shell" {
		rule = "shell/... imports no package of ours outside shell/..."
	}
	if testOnly {
		rule += fmt.Sprintf(" (tests also %s)", "internal, shell/sim, bitstreams")
	}
	return errors.New(rule)
}

func areaNames() string {
	var names []string
	for _, a := range areas {
		names = append(names, a.name)
	}
	return strings.Join(names, ", ")
}

// pkg is the part of `go list -json` this test reads.
type pkg struct {
	ImportPath   string
	Name         string
	Dir          string
	Doc          string
	Imports      []string
	TestImports  []string
	XTestImports []string
	Error        *struct{ Err string }
}

// moduleRoot walks up from the working directory to the directory of go.mod
// and returns it with the module path.
func moduleRoot(t *testing.T) (dir, module string) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		f, err := os.Open(filepath.Join(dir, "go.mod"))
		if err == nil {
			defer f.Close()
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if m, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
					return dir, strings.Trim(strings.TrimSpace(m), `"`)
				}
			}
			t.Fatalf("%s/go.mod has no module line", dir)
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// listPackages runs `go list -e -json ./...` at the module root.
func listPackages(t *testing.T) (module string, pkgs []pkg) {
	t.Helper()
	root, module := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-deps=false",
		"-json=ImportPath,Name,Dir,Doc,Imports,TestImports,XTestImports,Error", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no packages")
	}
	return module, pkgs
}

// rel returns path relative to the module, and whether it is ours.
func rel(module, path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

func TestImportDirection(t *testing.T) {
	module, pkgs := listPackages(t)
	for _, p := range pkgs {
		if p.Error != nil {
			t.Errorf("%s: go list: %s", p.ImportPath, p.Error.Err)
		}
		from, ok := rel(module, p.ImportPath)
		if !ok {
			continue
		}
		prod := map[string]bool{}
		for _, imp := range p.Imports {
			prod[imp] = true
		}
		check := func(imp string, testOnly bool) {
			to, ours := rel(module, imp)
			if !ours || to == from {
				return
			}
			if err := checkImport(from, to, testOnly); err != nil {
				kind := "imports"
				if testOnly {
					kind = "imports (in tests)"
				}
				t.Errorf("%s %s %s: breaks the rule: %v", p.ImportPath, kind, imp, err)
			}
		}
		for _, imp := range p.Imports {
			check(imp, false)
		}
		for _, imp := range slices.Concat(p.TestImports, p.XTestImports) {
			if !prod[imp] {
				check(imp, true)
			}
		}
	}
}

func TestPackageDocs(t *testing.T) {
	_, pkgs := listPackages(t)
	for _, p := range pkgs {
		if strings.TrimSpace(p.Doc) == "" {
			t.Errorf("package %s (%s) has no package doc comment; add one, e.g. in doc.go", p.ImportPath, p.Dir)
		}
	}
}

func TestCheckImport(t *testing.T) {
	for _, c := range []struct {
		from, to string
		testOnly bool
		ok       bool
	}{
		// shell stands alone.
		{"shell/sim", "shell", false, true},
		{"shell", "bitstreams/loopback", false, false},
		{"shell/sim", "internal/ring", false, false},
		{"shell/sim", "internal/testenv", true, true},
		{"shell/sim", "bitstreams/loopback/model", true, true},
		// bitstreams on shell.
		{"bitstreams/alidnn/model", "shell/sim", false, true},
		{"bitstreams/alidnn/model", "bitstreams/alidnn/isa", false, true},
		{"bitstreams/alidnn/model", "hdk/image", false, false},
		{"bitstreams/loopback", "sdk/faas", false, false},
		// hdk on shell and bitstreams.
		{"hdk/image", "bitstreams/alidnn/isa", false, true},
		{"hdk/seal", "shell", false, true},
		{"hdk/image", "sdk/faas", false, false},
		{"hdk/cmd/hdk", "hdk/sign", false, true},
		// The node agent is a client of the registry, not a part of it.
		{"services/agent/regclient", "sdk/registryapi", false, true},
		{"services/agent/loader", "services/registry/nodetrust", false, false},
		{"services/cmd/faasd", "services/registry/api", false, false},
		{"services/agent/server", "services/registry/server", true, true},
		{"services/cmd/registry", "services/registry/api", false, true},
		// sdk on shell, isa, hdk/image.
		{"sdk/alidnn", "bitstreams/alidnn/isa", false, true},
		{"sdk/alidnn", "bitstreams/alidnn/isa/enc", false, true},
		{"sdk/alidnn", "bitstreams/alidnn/model", false, false},
		{"sdk/alidnn", "bitstreams/alidnn", false, true},
		{"sdk/alidnn", "bitstreams/loopback/model", false, false},
		{"sdk/cmd/faas", "shell/sim", false, true},
		{"sdk/cmd/faas", "bitstreams/alidnn/model", false, true},
		{"sdk/cmd/faas", "services/agent/device", false, false},
		{"sdk/faas", "hdk/image", false, true},
		{"sdk/faas", "hdk/seal", false, false},
		{"sdk/faas", "shell", false, true},
		{"sdk/alidnn", "bitstreams/alidnn/model", true, true},
		// services on everything; nothing else on services.
		{"services/registry/catalog", "hdk/validate", false, true},
		{"services/registry", "web", false, true},
		{"services/registry/store", "migrations", false, true},
		{"services/registry/oci", "services/registry/blob", false, true},
		{"services/cmd/faasd", "services/agent", false, true},
		{"services/cmd/faasd", "bitstreams/alidnn/model", false, true},
		{"sdk/faas", "services/agent", false, false},
		{"sdk/faas", "services/agent", true, false},
		{"hdk/validate", "services/registry", false, false},
		{"internal/testenv", "services/registry", false, false},
		// the agent knows neither roles nor the simulator, but for its sim backend.
		{"services/agent/device/sim", "shell/sim", false, true},
		{"services/agent/slots", "shell/sim", false, false},
		{"services/agent/device/devicetest", "shell/sim", false, true},
		{"services/agent/device/devicetest", "bitstreams/loopback/model", false, true},
		{"services/agent/device/xdma", "bitstreams/loopback/model", false, false},
		{"services/agent/selftest", "bitstreams/loopback", false, true},
		{"services/agent/queue", "bitstreams/alidnn/isa", false, true},
		{"services/agent/device/sim", "bitstreams/loopback/model", false, false},
		{"services/agent/slots", "bitstreams/loopback/model", true, true},
		{"services/agent/slots", "shell/sim", true, true},
		// no cmd imports.
		{"services/cmd/faasd", "services/cmd/registry", false, false},
		{"sdk/cmd/faas", "hdk/cmd/hdk", false, false},
		{"internal/layout", "internal/cmd/bench", true, false},
		// internal is for everyone but shell; testenv for tests only.
		{"hdk/image", "internal/testenv", false, false},
		{"hdk/image", "internal/testenv", true, true},
		{"services/registry/store", "internal/testenv", false, false},
		{"services/registry/store", "internal/testenv", true, true},
		{"sdk/faas", "internal/ring", false, true},
		{"internal/bench", "sdk/faas", false, true},
		// leaves.
		{"web", "shell", false, false},
		{"migrations", "internal/x", false, true},
		// examples use the SDK like any tenant's program; nobody uses them.
		{"examples/mnist", "sdk/alidnn", false, true},
		{"examples/mnist", "sdk/faas", false, true},
		{"examples/mnist", "bitstreams/alidnn", false, false},
		{"examples/mnist", "internal/ring", false, false},
		{"examples/mnist", "internal/testenv", true, true},
		{"examples/mnist", "services/agent", true, false},
		{"examples/mnist", "sdk/cmd/faas", false, false},
		{"sdk/alidnn", "examples/mnist", false, false},
		{"internal/e2e", "examples/mnist", true, false},
		// unknown folders.
		{"tools/gen", "shell", false, false},
		{"", "shell", false, false},
	} {
		err := checkImport(c.from, c.to, c.testOnly)
		if (err == nil) != c.ok {
			t.Errorf("checkImport(%q, %q, testOnly=%v) = %v; want allowed=%v", c.from, c.to, c.testOnly, err, c.ok)
		}
	}
}

// TestNoSourceIgnored: no Go file of the tree is ignored by .gitignore, so
// none is left out of a commit unnoticed (a pattern meant for a binary,
// /hdk, once hid the new package hdk/publish).
func TestNoSourceIgnored(t *testing.T) {
	root, _ := moduleRoot(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but %s is not a git checkout", root)
		}
		t.Skip("not a git checkout")
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "build" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".go") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", append([]string{"check-ignore", "--no-index", "--"}, files...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	// check-ignore exits 1 when nothing is ignored.
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 1 {
		return
	}
	if err != nil {
		t.Fatalf("git check-ignore: %v", err)
	}
	t.Errorf(".gitignore ignores Go sources:\n%s", out)
}
