// Package pgtest starts throwaway PostgreSQL servers for tests: initdb into
// a new temporary directory, then the postgres server on a free loopback
// port with fsync off, stopped and its directory removed at the end. It
// never uses a server that happens to run on the machine.
//
// The binaries come from PATH or from /usr/lib/postgresql/<version>/bin
// (Debian's packages put them there). A missing PostgreSQL is an error,
// never a skip: the project's test command installs Debian's postgresql
// package when it can. PostgreSQL refuses to run as root; under root the
// server runs as the "postgres" account (or "nobody" without one), and its
// directory belongs to it.
//
// The server is a child of the test process (not daemonized by pg_ctl):
// the parent-death signal kills it if the test binary dies (and its
// backends exit when it does), and Pause, Resume and Kill signal the
// postmaster and each of its children (backends run in sessions of their
// own, so a process group would not reach them), for fault tests.
//
// Share one server per test binary (start it in TestMain with [New]) and
// give each test a database of its own ([Server.NewDatabase]); start a
// server of its own ([Start]) for a test that kills, pauses or restarts it.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options adjust a server.
type Options struct {
	// Durable turns synchronous_commit on, so that a commit is written to
	// the kernel before it is acknowledged: a server killed (SIGKILL) and
	// restarted keeps every commit it acknowledged. fsync stays off, which
	// only a crash of the machine would show. Default: off, for speed.
	Durable bool
	// Settings are added to the server's command line as -c name=value.
	Settings []string
}

// Server is one PostgreSQL server process and its data directory.
type Server struct {
	Host string // 127.0.0.1
	Port int

	dir  string // data/, sock/ and server.log
	bin  binaries
	cred *syscall.Credential
	opts Options

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool

	dbSeq atomic.Int64
}

// New initializes a data directory and starts a server on a free loopback
// port. Close stops it and removes the directory. Use it in TestMain, where
// there is no testing.TB; tests use [Start].
func New(opts Options) (*Server, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := serverUser()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s := &Server{Host: "127.0.0.1", dir: dir, bin: bin, cred: cred, opts: opts}
	if err := s.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var lastErr error
	for range 5 { // a free port can be taken between the check and the start
		if s.Port, err = freePort(); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		if lastErr = s.start(); lastErr == nil {
			return s, nil
		}
	}
	os.RemoveAll(dir)
	return nil, lastErr
}

// Start is New for a test: it fails the test if the server cannot start,
// and closes it when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// initdb creates the data directory, owned by the server's user.
func (s *Server) initdb() error {
	if err := os.Chmod(s.dir, 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := os.Mkdir(s.sockDir(), 0o755); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	if err := giveTo(s.dir, s.cred); err != nil {
		return fmt.Errorf("pgtest: giving %s to the postgres account: %w", s.dir, err)
	}
	cmd := exec.Command(s.bin.initdb, "-D", s.dataDir(), "-U", "postgres", "--auth=trust",
		"--no-sync", "--encoding=UTF8", "--locale=C", "--wal-segsize=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	cmd.Dir = s.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: %s: %v\n%s", s.bin.initdb, err, out)
	}
	return nil
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }
func (s *Server) sockDir() string { return filepath.Join(s.dir, "sock") }
func (s *Server) logFile() string { return filepath.Join(s.dir, "server.log") }

// Log returns what the server wrote to its log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.logFile())
	return string(b)
}

// start launches the postmaster on s.Port and waits until it serves.
func (s *Server) start() error {
	syncCommit := "off"
	if s.opts.Durable {
		syncCommit = "on"
	}
	args := []string{"-D", s.dataDir(), "-p", strconv.Itoa(s.Port), "-k", s.sockDir(),
		"-c", "listen_addresses=" + s.Host,
		"-c", "fsync=off", "-c", "synchronous_commit=" + syncCommit, "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "log_min_messages=warning"}
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
	}
	log, err := os.OpenFile(s.logFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(s.bin.postgres, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("pgtest: postgres on port %d exited at start; log:\n%s", s.Port, s.Log())
		default:
		}
		// Ready means this server serves: another one may hold the port
		// (taken since freePort, or since a Kill), and would answer too.
		if s.isOurs() {
			return nil
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("pgtest: postgres on port %d not ready after 30s; log:\n%s", s.Port, s.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// isOurs reports whether the server on s.Port accepts connections and
// keeps its data in s's directory.
func (s *Server) isOurs() bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var dir string
	if err := conn.QueryRow(ctx, "SHOW data_directory").Scan(&dir); err != nil {
		return false
	}
	return dir == s.dataDir()
}

// DSN returns the connection string of database on this server, as the
// superuser postgres (trust authentication, no TLS).
func (s *Server) DSN(database string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable connect_timeout=5", s.Host, s.Port, database)
}

// Exec runs sql in database, on a connection of its own.
func (s *Server) Exec(ctx context.Context, database, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.DSN(database))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// NewDatabase creates a database of the test's own and returns its
// connection string. The server is throwaway: the database is left for
// Close to remove with everything else.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	name := "t" + strconv.FormatInt(s.dbSeq.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return s.DSN(name)
}

// freePort returns a loopback port that is free now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: no free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
