package scratch

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// holderEnv, when set, makes the test binary a gateway stand-in: it opens a
// scratch directory under the named parent, prints its path and waits to
// be killed.
const holderEnv = "SCRATCH_TEST_HOLDER_PARENT"

func TestMain(m *testing.M) {
	if parent := os.Getenv(holderEnv); parent != "" {
		d, err := Open(parent)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println(d.Path())
		time.Sleep(time.Minute) // the test kills it long before
		os.Exit(1)
	}
	os.Exit(m.Run())
}

func TestSessionDirectoriesLiveInTheInstanceDirectoryWhichCloseRemoves(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a, err := d.SessionDir("test")
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.SessionDir("test")
	if err != nil {
		t.Fatal(err)
	}
	if a == b || filepath.Dir(a) != d.Path() || filepath.Dir(b) != d.Path() || !strings.HasPrefix(filepath.Base(a), "test-") {
		t.Errorf("session directories %s and %s in %s", a, b, d.Path())
	}
	if err := os.WriteFile(filepath.Join(a, "left"), []byte("by an agent"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the instance directory is still there after Close: %v", err)
	}
}

func TestARunningInstanceIsNeverSwept(t *testing.T) {
	parent := t.TempDir()
	first, err := Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	session, err := first.SessionDir("test")
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if _, err := os.Stat(session); err != nil {
		t.Errorf("a second instance swept the first one's session directory: %v", err)
	}
	if first.Path() == second.Path() {
		t.Errorf("two instances share %s", first.Path())
	}
}

func TestTheInstanceOfAKilledProcessIsSweptAtTheNextOpen(t *testing.T) {
	parent := t.TempDir()
	holder := exec.Command(os.Args[0], "-test.run=^$")
	holder.Env = append(os.Environ(), holderEnv+"="+parent)
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holder.Process.Kill(); _ = holder.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Scan()
		line <- sc.Text()
	}()
	var held string
	select {
	case held = <-line:
	case <-time.After(10 * time.Second):
		t.Fatal("the holder process never reported its directory")
	}
	if !filepath.IsAbs(held) {
		t.Fatalf("the holder process said %q", held)
	}

	// While its process lives, the directory stays.
	alive, err := Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer alive.Close()
	if _, err := os.Stat(held); err != nil {
		t.Fatalf("swept while its process runs: %v", err)
	}

	if err := holder.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = holder.Wait()
	next, err := Open(parent)
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if _, err := os.Stat(held); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the killed process's directory %s survived the next Open: %v", held, err)
	}
	if _, err := os.Stat(alive.Path()); err != nil {
		t.Errorf("the live instance's directory went with it: %v", err)
	}
}

func TestAScratchParentOthersCouldTamperWithIsRefused(t *testing.T) {
	parent := t.TempDir()
	base := filepath.Join(parent, "acpgate-scratch-"+strconv.Itoa(os.Getuid()))
	if err := os.Mkdir(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(parent); err == nil {
		t.Error("a world-writable scratch parent was used")
	}

	elsewhere := t.TempDir()
	victim := filepath.Join(elsewhere, "precious")
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	parent = t.TempDir()
	if err := os.Symlink(elsewhere, filepath.Join(parent, "acpgate-scratch-"+strconv.Itoa(os.Getuid()))); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(parent); err == nil {
		t.Error("a scratch parent that is a symbolic link was used")
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("the sweep followed the link and removed %s: %v", victim, err)
	}
}
