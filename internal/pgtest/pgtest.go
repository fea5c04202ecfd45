// Package pgtest starts a real, throwaway PostgreSQL server for tests:
// initdb into a fresh temporary directory, then pg_ctl start with the
// server listening on a Unix socket in that directory only (no TCP), and
// stop and removal when the test ends. Nothing is mocked and nothing
// outside the directory is touched.
//
// PostgreSQL refuses to run as root. When the test runs as root, the
// server runs as the unprivileged "postgres" user that Debian's package
// creates (or "nobody" when there is none); the test itself connects as
// the database superuser the cluster is initialised with.
//
// The server binaries are found through $WASMHIST_PG_BIN, then Debian's
// /usr/lib/postgresql/<version>/bin (newest version first), then $PATH. A
// machine without them fails the test with what to install: PostgreSQL
// tests are never skipped.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Superuser is the database superuser of every cluster this package
// creates. It needs no password: only the socket's owner can connect.
const Superuser = "postgres"

// port names the socket file (.s.PGSQL.<port>); with TCP off it takes no
// network port, so every server can use the same one.
const port = 5432

// Server is one running cluster.
type Server struct {
	// Dir holds the cluster's data, its log and its socket.
	Dir  string
	bin  string
	cred *syscall.Credential
}

// Start initialises and starts a cluster for tb and stops it when tb
// ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := binDir()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	cred, err := serverUser()
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	// Not tb.TempDir: its parents are private to the test's user, and the
	// server's user must reach its own directory.
	dir, err := os.MkdirTemp("", "wasmhist-pg-")
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("pgtest: %v", err)
		}
	}
	s := &Server{Dir: dir, bin: bin, cred: cred}
	data := filepath.Join(dir, "data")
	// -N: no fsync at initdb; --no-locale and UTF8 so results do not
	// depend on the machine's locale.
	if out, err := s.run("initdb", "-D", data, "-U", Superuser, "--auth=trust", "-E", "UTF8", "--no-locale", "-N"); err != nil {
		tb.Fatalf("pgtest: initdb: %v\n%s", err, out)
	}
	// Prepared transactions on, as some operators have them: a plugin
	// must not be able to leave one behind.
	opts := fmt.Sprintf("-k %s -c listen_addresses='' -p %d -F -c max_prepared_transactions=4", dir, port)
	if out, err := s.run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		tb.Fatalf("pgtest: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	tb.Cleanup(func() {
		// immediate: the data is thrown away, so no checkpoint is needed.
		if out, err := s.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			tb.Errorf("pgtest: pg_ctl stop: %v\n%s", err, out)
		}
	})
	return s
}

// DSN returns a connection string for database db as the superuser, in
// the key=value form pgx and libpq accept.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Dir, port, Superuser, db)
}

// Admin creates database db owned by a new role of the same name that has
// CREATEROLE but is not a superuser, and returns that role's connection
// string for db: the administrator a managed service gives.
func (s *Server) Admin(tb testing.TB, db string) string {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	defer conn.Close(ctx)
	q := pgx.Identifier{db}.Sanitize()
	for _, stmt := range []string{
		`CREATE ROLE ` + q + ` LOGIN CREATEROLE NOSUPERUSER`,
		`CREATE DATABASE ` + q + ` OWNER ` + q,
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			tb.Fatalf("pgtest: %s: %v", stmt, err)
		}
	}
	return fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Dir, port, db, db)
}

// Log returns what the server wrote to its log so far, for a failing
// test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "log"))
	return string(b)
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.Dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.Bytes(), err
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		return out.Bytes(), fmt.Errorf("%s did not finish in 2 minutes", name)
	}
}

// binDir finds the directory of initdb and pg_ctl.
func binDir() (string, error) {
	if d := os.Getenv("WASMHIST_PG_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries (initdb, pg_ctl) not found in $WASMHIST_PG_BIN, /usr/lib/postgresql/*/bin or $PATH: install them (Debian: apt-get install postgresql; .ci/run does this)")
}

// version reads the major version out of /usr/lib/postgresql/<v>/bin.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// serverUser returns the credential to run the server with: nil to run as
// the test's own user, which is fine unless that is root.
func serverUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	var errs []string
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, fmt.Errorf("running as root, and no unprivileged user to run PostgreSQL as (%s): create one, e.g. useradd postgres", strings.Join(errs, "; "))
}
