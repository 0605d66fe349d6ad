// Package layout holds no code, only tests that keep the module in the shape
// that docs/ARCHITECTURE.md describes.
//
// layout_test.go reads every package of the module with `go list -json ./...`
// and checks each import of one of our packages against these rules, where
// "X" means the package X and everything below it:
//
//	shell        may import only shell.
//	bitstreams   may import shell, bitstreams.
//	hdk          may import shell, bitstreams, hdk.
//	sdk          may import shell, role contracts (bitstreams/... except
//	             bitstreams/*/model), hdk/image, sdk; its mains (sdk/cmd/...)
//	             also shell/sim and role models, to run an engine in process.
//	services     may import shell, bitstreams, hdk, sdk, services, web, migrations.
//	internal     may import shell, bitstreams, hdk, sdk, web, migrations, internal.
//	web          may import web; migrations may import migrations; deploy may import deploy.
//	examples     may import only sdk: they are programs a tenant could write.
//	everyone but shell and examples may import internal (shell imports
//	nothing of ours).
//
// and, above the per-folder rules:
//
//   - Nothing imports a package with a path element "cmd" (mains stay thin),
//     nor a package under examples.
//   - Nothing outside services imports services: services/cmd/... wires the
//     services together, services packages may import each other.
//   - internal/testenv is imported from _test.go files only.
//   - services/agent never imports a role model (bitstreams/*/model), only
//     roles' contracts (bitstreams/<role>, bitstreams/*/isa), and of
//     services/agent only services/agent/device/sim
//     imports shell/sim; the mains wire role models into the simulator. The
//     device conformance suite, services/agent/device/devicetest, is test
//     support and may import both.
//   - A package lives in one of the top-level folders above.
//
// Imports made only from _test.go files (go list's TestImports and
// XTestImports) are also allowed to reach internal (including
// internal/testenv), shell/sim and bitstreams (role models), so that tests can
// run a simulated board with roles loaded. Every other rule holds for tests
// too: no test imports a cmd package, and no test outside services imports
// services (end-to-end tests run the built binaries instead).
//
// A second test requires a package doc comment on every package. A third,
// TestFunctionLength (funclen_test.go), keeps functions short: none of the
// non-test code over 150 lines and at most 10 over 100 (`make lint` prints
// the figures).
package layout
