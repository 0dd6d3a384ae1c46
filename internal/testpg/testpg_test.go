package testpg_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/acpgate/acpgate/internal/testpg"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

func connect(t *testing.T, dsn string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatalf("connecting to %s: %v", dsn, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func TestEachCallerGetsAFreshDatabaseOverTCP(t *testing.T) {
	ctx := context.Background()
	a, b := testpg.Start(t), testpg.Start(t)
	if a == b {
		t.Fatalf("two calls returned one database: %s", a)
	}
	for _, dsn := range []string{a, b} {
		if !strings.HasPrefix(dsn, "postgres://") || !strings.Contains(dsn, "@127.0.0.1:") {
			t.Errorf("DSN %q is not a URL over TCP to 127.0.0.1, which another process could use", dsn)
		}
	}
	ca := connect(t, a)
	if _, err := ca.Exec(ctx, `CREATE TABLE mine (x int)`); err != nil {
		t.Fatal(err)
	}
	var tables int
	if err := connect(t, b).QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Errorf("the second database has %d tables, want an empty one", tables)
	}
}

func TestTheServerRunsAsAnotherUserThanRootWithFsyncOff(t *testing.T) {
	ctx := context.Background()
	conn := connect(t, testpg.Start(t))
	var fsync string
	var pid int
	if err := conn.QueryRow(ctx, `SELECT current_setting('fsync'), pg_backend_pid()`).Scan(&fsync, &pid); err != nil {
		t.Fatal(err)
	}
	if fsync != "off" {
		t.Errorf("fsync = %s, want off", fsync)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid := strings.Fields(rest)[0]
			if os.Geteuid() == 0 && uid == "0" {
				t.Errorf("the server's backend runs as root")
			}
			if os.Geteuid() != 0 && uid != fmt.Sprint(os.Geteuid()) {
				t.Errorf("the server's backend runs as uid %s, not the tests' %d", uid, os.Geteuid())
			}
			return
		}
	}
	t.Fatal("no Uid line in the backend's status")
}

// childEnv makes the test binary, run again by
// TestTheServerDiesWithItsTestBinary, start a server and wait to be killed.
const childEnv = "TESTPG_CHILD"

func TestTheServerDiesWithItsTestBinary(t *testing.T) {
	ctx := context.Background()
	if os.Getenv(childEnv) == "1" {
		conn := connect(t, testpg.Start(t))
		var pid int
		var dataDir string
		if err := conn.QueryRow(ctx, `SELECT pg_backend_pid(), current_setting('data_directory')`).Scan(&pid, &dataDir); err != nil {
			t.Fatal(err)
		}
		fmt.Printf("server %d %s\n", parentPID(t, pid), dataDir)
		time.Sleep(time.Minute) // killed long before
		t.Fatal("not killed")
	}
	testpg.Start(t) // skips here, rather than in the child, without PostgreSQL

	child := exec.Command(os.Args[0], "-test.run=^TestTheServerDiesWithItsTestBinary$", "-test.v")
	child.Env = append(os.Environ(), childEnv+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Wait()
	defer child.Process.Kill()
	var pid int
	var dataDir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if _, err := fmt.Sscanf(sc.Text(), "server %d %s", &pid, &dataDir); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatal("the child printed no server pid")
	}
	defer os.RemoveAll(filepath.Dir(dataDir))
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the server %d is not running before its test binary is killed: %v", pid, err)
	}
	child.Process.Kill()
	child.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the server %d still runs 10s after its test binary was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// parentPID is the parent of process pid (a backend's is the server).
func parentPID(t *testing.T, pid int) int {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	t.Fatal("no PPid line")
	return 0
}

func TestAServerStartedOutsideATestMakesDatabasesOfIdentifierNamesAndStopRemovesIt(t *testing.T) {
	ctx := context.Background()
	srv, err := testpg.StartServer("")
	if errors.Is(err, testpg.ErrNotInstalled) && os.Getenv(testpg.RequireEnv) != "1" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			srv.Stop()
		}
	}()
	dsn, err := srv.CreateDatabase("bench_1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(dsn, "postgres://") || !strings.HasSuffix(strings.Split(dsn, "?")[0], "/bench_1") {
		t.Errorf("DSN %q is not a URL of database bench_1", dsn)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	var dataDir string
	err = conn.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dataDir)
	conn.Close(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.CreateDatabase("bench_1"); err == nil {
		t.Error("creating bench_1 twice succeeded")
	}
	for _, name := range []string{"", "x; DROP DATABASE postgres", "1abc", "a-b", `"q"`} {
		if _, err := srv.CreateDatabase(name); err == nil {
			t.Errorf("CreateDatabase(%q) succeeded: the name goes into the statement as it is", name)
		}
	}
	if err := srv.DropDatabase("bench_1"); err != nil {
		t.Errorf("dropping bench_1: %v", err)
	}
	stopped = true
	if err := srv.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(srv.Pid(), 0); err == nil {
		t.Errorf("the server %d still runs after Stop", srv.Pid())
	}
	if _, err := os.Stat(filepath.Dir(dataDir)); !os.IsNotExist(err) {
		t.Errorf("the server's directory %s is still there after Stop (%v)", filepath.Dir(dataDir), err)
	}
}

func TestAHaltedServerRefusesConnectionsAndResumesOnTheSameDSNWithItsData(t *testing.T) {
	ctx := context.Background()
	srv, dsn := testpg.StartOwn(t)
	if _, err := connect(t, dsn).Exec(ctx, `CREATE TABLE kept (x int)`); err != nil {
		t.Fatal(err)
	}
	if err := srv.Halt(); err != nil {
		t.Fatal(err)
	}
	bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(bounded, dsn); err == nil {
		conn.Close(ctx)
		t.Fatal("a halted server took a connection")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := connect(t, dsn).QueryRow(ctx, `SELECT count(*) FROM kept`).Scan(&n); err != nil {
		t.Fatalf("the table made before the halt, after resuming: %v", err)
	}
}
