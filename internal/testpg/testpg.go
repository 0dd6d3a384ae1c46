// Package testpg runs a real PostgreSQL server for tests: one per test
// binary, from Debian's postgresql package (the binaries under
// /usr/lib/postgresql/VERSION/bin), in a temporary data directory, with a
// fresh database for each caller. Tests of the PostgreSQL store and
// end-to-end tests of several acpgate processes use it; mocking the
// database would test nothing of what matters (locks, constraints,
// notifications, the clock).
//
// A test binary that uses it calls Main from its TestMain, so that the
// server is stopped and its directory removed when the tests end, however
// they end:
//
//	func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }
//
// The server runs as a user other than root when the tests run as root
// (PostgreSQL refuses root): the postgres system user, else nobody. It
// listens on a unix socket in its directory and on 127.0.0.1 with a free
// port, trusts every local connection, and runs with fsync off: the data
// is the tests' and is thrown away. It is killed if the test binary dies
// (the kernel's parent-death signal), so a crashed test leaves no server
// behind.
//
// Without the binaries, Start skips the test, unless ACPGATE_REQUIRE_POSTGRES
// is 1 (as in make go-test), where a missing PostgreSQL is a failure rather
// than a silently smaller suite.
//
// Programs that are not tests (the benchmark harness) start a server of
// their own with StartServer, make databases on it with CreateDatabase and
// stop it with Stop; Start and Main are that, for a test binary.
package testpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/testutil"
)

// RequireEnv names the environment variable that makes a missing
// PostgreSQL a failure.
const RequireEnv = "ACPGATE_REQUIRE_POSTGRES"

// binGlob finds Debian's PostgreSQL binaries, one directory per version.
const binGlob = "/usr/lib/postgresql/*/bin"

// superuser is the role initdb creates; every database is reached as it.
const superuser = "acpgate"

// Bounds of the server's life.
const (
	// readyTimeout bounds the wait for a new server to take
	// connections (initdb is not in it).
	readyTimeout = 30 * time.Second
	// stopTimeout bounds a fast shutdown before the server is killed.
	stopTimeout = 10 * time.Second
	// startAttempts: the free port is found before the server binds it,
	// and another process may take it in between.
	startAttempts = 3
)

// ErrNotInstalled is what StartServer returns (wrapped, with where it
// looked) when PostgreSQL's server binaries are not installed: a caller
// that can do without PostgreSQL tells this apart from a server that
// failed to start.
var ErrNotInstalled = errors.New("PostgreSQL's server binaries are not installed (Debian's postgresql package)")

// the is the test binary's server, started by the first Start and
// stopped by Main: one per process is the point, so it is the one piece
// of package state.
var the struct {
	mu      sync.Mutex
	main    bool // Main is running the tests
	started bool
	srv     *Server
	err     error // why the server could not start; the same for every caller
	skip    string
	dbs     int
}

// M is what Main runs: a *testing.M, or what wraps one.
type M interface{ Run() int }

// Main runs m's tests and then stops the server, if a test started it.
// It returns m.Run's exit code, for os.Exit.
func Main(m M) int {
	the.mu.Lock()
	the.main = true
	the.mu.Unlock()
	code := m.Run()
	the.mu.Lock()
	srv := the.srv
	the.srv = nil
	the.mu.Unlock()
	if srv != nil {
		if err := srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testpg:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Wrap is m, run through Main: for a TestMain that hands its M on, as
// goleak.VerifyTestMain(testpg.Wrap(m)) does, so that the server is
// stopped before goroutines are checked for leaks.
func Wrap(m M) M { return mainRunner{m} }

type mainRunner struct{ m M }

func (r mainRunner) Run() int { return Main(r.m) }

// Start returns the DSN of a new, empty database on the test binary's
// server, starting the server if need be; the database is dropped when t
// ends. The DSN is a postgres:// URL over TCP to 127.0.0.1, so another
// process (an acpgate under test) can use it as it is.
func Start(t testing.TB) string {
	t.Helper()
	srv, err := server0(t)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	the.mu.Lock()
	the.dbs++
	name := fmt.Sprintf("test_%d", the.dbs)
	the.mu.Unlock()
	dsn, err := srv.CreateDatabase(name)
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.DropDatabase(name); err != nil {
			t.Errorf("testpg: %v", err)
		}
	})
	return dsn
}

// server0 is the running server, started on first use.
func server0(t testing.TB) (*Server, error) {
	t.Helper()
	the.mu.Lock()
	defer the.mu.Unlock()
	if !the.main {
		return nil, errors.New("the test binary does not run testpg.Main from its TestMain, so the server would outlive it")
	}
	if !the.started {
		the.started = true
		the.srv, the.err = StartServer("")
		if errors.Is(the.err, ErrNotInstalled) {
			the.skip = the.err.Error()
		}
	}
	if the.skip != "" {
		if os.Getenv(RequireEnv) == "1" {
			return nil, fmt.Errorf("%s, and %s=1 requires it (install Debian's postgresql package: make deps)", the.skip, RequireEnv)
		}
		t.Skipf("testpg: %s (install Debian's postgresql package to run this test)", the.skip)
	}
	return the.srv, the.err
}

// findBin is the directory of the newest PostgreSQL version installed, or
// an error wrapping ErrNotInstalled.
func findBin() (string, error) {
	dirs, _ := filepath.Glob(binGlob)
	version := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(a) - version(b) })
	for _, d := range slices.Backward(dirs) {
		if isExecutable(filepath.Join(d, "initdb")) && isExecutable(filepath.Join(d, "postgres")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%w: no initdb and postgres in %s", ErrNotInstalled, binGlob)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Server is a running PostgreSQL, started by StartServer, on which
// CreateDatabase makes databases; Stop ends it and removes its directory.
// It is killed if the program that started it dies (the kernel's
// parent-death signal), so a crashed program leaves no server behind,
// though its directory stays.
type Server struct {
	bin  string // the directory of PostgreSQL's binaries
	dir  string // the temporary directory: data/, the socket, the log
	port int
	cred *syscall.Credential // whom it runs as; nil for the tests' user
	cmd  *exec.Cmd
	// exited is closed once the process has been waited for; waitErr
	// is then its result.
	exited  chan struct{}
	waitErr error
	log     *os.File

	mu   sync.Mutex // guards conn: one admin statement at a time
	conn *pgx.Conn
}

// StartServer makes a data directory with initdb, in a new directory
// under parent (the system's temporary directory when ""), and starts
// postgres on it: the newest version of Debian's binaries installed, or an
// error wrapping ErrNotInstalled. Run as root, the server runs as another
// user (see the package's doc), who must be able to reach parent.
func StartServer(parent string) (_ *Server, err error) {
	bin, err := findBin()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(parent, "acpgate-pg-")
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", superuser, "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
	initdb.Env = env()
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			log.Close()
		}
	}()
	for attempt := 1; ; attempt++ {
		srv, err := run(bin, dir, cred, log)
		if err == nil || attempt == startAttempts {
			return srv, err
		}
	}
}

// credential is whom the server runs as: nil (the tests' user) unless the
// tests run as root.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
		if err1 == nil && err2 == nil && uid != 0 {
			return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
		}
	}
	return nil, errors.New("running as root, and neither a postgres nor a nobody user to run PostgreSQL as")
}

// env is the server's environment: nothing of the tests'.
func env() []string { return []string{"LC_ALL=C", "TZ=UTC", "PATH=/usr/bin:/bin"} }

// run starts postgres on a free port and waits until it takes
// connections.
func run(bin, dir string, cred *syscall.Credential, log *os.File) (*Server, error) {
	port, err := testutil.FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir, port: port, cred: cred, log: log}
	if err := s.launch(); err != nil {
		return nil, err
	}
	return s, nil
}

// launch starts postgres on s's directory and port and waits until it
// takes connections.
func (s *Server) launch() error {
	s.exited = make(chan struct{})
	s.cmd = exec.Command(filepath.Join(s.bin, "postgres"), "-D", filepath.Join(s.dir, "data"),
		"-k", s.dir, "-h", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=300", "-c", "log_min_messages=warning")
	s.cmd.Env = env()
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	cmd, exited := s.cmd, s.exited
	started := make(chan error)
	// The parent-death signal is sent when the thread that started the
	// child exits, not the process: this goroutine holds its thread
	// until the server has exited, and reaps it.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting postgres: %w", err)
	}
	if err := s.ready(); err != nil {
		s.kill()
		return err
	}
	return nil
}

// ready waits, up to readyTimeout, until the server takes a connection,
// which it keeps for admin statements.
func (s *Server) ready() error {
	deadline := time.Now().Add(readyTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=%s dbname=postgres sslmode=disable", s.dir, s.port, superuser))
		cancel()
		if err == nil {
			s.conn = conn
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("postgres exited (%v) before taking connections; its log:\n%s", s.waitErr, s.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres took no connection within %s (%v); its log:\n%s", readyTimeout, err, s.logTail())
		}
	}
}

// logTail is the end of the server's log, for a failure's message.
func (s *Server) logTail() string {
	b, _ := os.ReadFile(s.log.Name())
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(bytes.TrimSpace(b))
}

// admin runs a statement as the superuser on the postgres database.
func (s *Server) admin(stmt string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	_, err := s.conn.Exec(ctx, stmt)
	return err
}

// CreateDatabase makes an empty database called name (an SQL
// identifier's characters: letters, digits, underscores) and returns its
// DSN: a postgres:// URL over TCP to 127.0.0.1, so that another process
// (an acpgate) can use it as it is.
func (s *Server) CreateDatabase(name string) (string, error) {
	if !isIdentifier(name) {
		return "", fmt.Errorf("creating database %q: a name of letters, digits and underscores, not starting with a digit, is needed", name)
	}
	if err := s.admin(`CREATE DATABASE ` + name); err != nil {
		return "", fmt.Errorf("creating database %s: %w", name, err)
	}
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, name), nil
}

// DropDatabase drops database name, closing its connections first.
func (s *Server) DropDatabase(name string) error {
	if !isIdentifier(name) {
		return fmt.Errorf("dropping database %q: not a database CreateDatabase could have made", name)
	}
	if err := s.admin(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
		return fmt.Errorf("dropping database %s: %w", name, err)
	}
	return nil
}

// isIdentifier reports whether name can go into a statement as it is:
// CREATE DATABASE takes no parameters.
func isIdentifier(name string) bool {
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return name != ""
}

// Pid is the server's process (the postmaster), whose children are its
// backends and workers: a benchmark counts their CPU as its own.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// kill stops the server at once and waits for it.
func (s *Server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// Stop shuts the server down (a fast shutdown: SIGINT), killing it after
// stopTimeout, and removes its directory.
func (s *Server) Stop() error {
	var errs []error
	if err := s.Halt(); err != nil {
		errs = append(errs, err)
	}
	s.log.Close()
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Halt shuts the server down as Stop does but keeps its data, so that
// Resume can start it again: a database outage, for a test of what its
// clients do meanwhile and after. Its clients' connections are closed,
// and new ones refused, until Resume.
func (s *Server) Halt() error {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
	s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.exited:
		return nil
	case <-time.After(stopTimeout):
		s.kill()
		return fmt.Errorf("postgres did not stop within %s of SIGINT; killed", stopTimeout)
	}
}

// Resume starts a halted server again, on the same port and data, and
// waits (up to readyTimeout) until it takes connections: the DSNs given
// out before Halt work again.
func (s *Server) Resume() error {
	select {
	case <-s.exited:
	default:
		return errors.New("resuming postgres: it is running (Halt it first)")
	}
	return s.launch()
}

// StartOwn starts a server for t alone, not the test binary's shared
// one, so that t can Halt and Resume it without disturbing other tests,
// and returns it with the DSN of a database on it. The server is stopped
// when t ends. Like Start, it skips t when PostgreSQL is not installed,
// unless RequireEnv says it must be.
func StartOwn(t testing.TB) (*Server, string) {
	t.Helper()
	srv, err := StartServer("")
	if errors.Is(err, ErrNotInstalled) && os.Getenv(RequireEnv) != "1" {
		t.Skipf("testpg: %v (install Debian's postgresql package to run this test)", err)
	}
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Errorf("testpg: %v", err)
		}
	})
	dsn, err := srv.CreateDatabase("test_own")
	if err != nil {
		t.Fatalf("testpg: %v", err)
	}
	return srv, dsn
}
