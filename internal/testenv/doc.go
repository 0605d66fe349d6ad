// Package testenv starts real dependencies for integration tests: a throwaway
// PostgreSQL cluster ([Postgres]) and a throwaway MinIO server ([MinIO]), each
// on a random loopback port with its own temporary directory, stopped and
// removed by t.Cleanup; and a small tmpfs to fill for real ([Tmpfs]).
// A test may stop and start the PostgreSQL server under its clients
// ([PG.Stop], [PG.Start]) and hand a directory to the server's OS user
// ([PG.Own]), for a tablespace on a Tmpfs, say.
//
// Binaries are found through environment variables first (FAAS_PG_BIN names
// the directory holding initdb, pg_ctl and postgres; FAAS_MINIO_BIN names the
// minio executable), then their usual install locations
// (/usr/lib/postgresql/15/bin, $(go env GOPATH)/bin/minio), then PATH.
// `make tools` installs both.
//
// A missing binary skips the test with a message saying how to install it,
// except when the environment variable CI is true (as parsed by
// strconv.ParseBool): then it is a test failure, never a silent skip.
//
// [TestData] finds the test data from outside the project: testdata/ at the
// repository root, or the folder $FAAS_TESTDATA names.
//
// Server output goes to a log file in the temporary directory; it is shown
// only when the server fails to start or the test fails.
//
// This package is for tests only: the layout test in internal/layout rejects
// a non-test import of it.
package testenv
