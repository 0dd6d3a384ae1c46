// Package scratch gives each gateway instance a directory of its own for the
// temporary working directories of its sessions, and removes what a gateway
// that died without cleaning up left behind.
//
// A gateway removes a session's temporary directory when the session closes,
// and that is all it can do while it runs: a gateway killed with SIGKILL (or
// by the OOM killer, or a power cut) leaves every open session's directory
// behind, with whatever the agents wrote into it, for ever. So the
// directories live in an instance directory,
//
//	$TMPDIR/acpgate-scratch-<uid>/<instance>/<agent>-<random>/
//
// that its gateway holds locked with flock(LOCK_EX) for as long as it runs.
// The kernel drops the lock when the process dies, however it dies. A
// gateway that starts sweeps the instance directories whose lock it can
// take (their gateway is gone) and removes them; it never touches one whose
// gateway still runs, however old.
//
// The lock is on the instance directory itself, not on a file inside it: a
// lock file would have to be created after its directory, and a sweep in
// between would find an instance it could neither lock nor tell from
// garbage. The uid in the name keeps the gateways of different users on one
// machine apart, and the shared parent is used only when it is a real
// directory of this user's that no one else can write to: otherwise another
// user could point the sweep at files of ours to remove.
package scratch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// Dir is one gateway instance's scratch directory, locked while it is open.
type Dir struct {
	path string
	lock *os.File // the directory, open and flocked; closing it unlocks
}

// Open creates and locks this instance's directory under parent (the
// system's temporary directory when parent is ""), after removing the
// instance directories of gateways that are no longer running. Failing to
// remove one is not an error: it is left for the next start.
func Open(parent string) (*Dir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	base := filepath.Join(parent, "acpgate-scratch-"+strconv.Itoa(os.Getuid()))
	if err := ownedDir(base); err != nil {
		return nil, err
	}
	sweep(base)
	// A sweep by another gateway starting now may take the lock of the
	// directory just made, before this one could, and remove it: then
	// try again with a new one.
	for range 10 {
		d, err := create(base)
		if err == nil || !errors.Is(err, errSwept) {
			return d, err
		}
	}
	return nil, fmt.Errorf("scratch: creating an instance directory in %s: %w", base, errSwept)
}

var errSwept = errors.New("another gateway's sweep removed it as it was made")

// ownedDir makes sure base is a directory of ours that only we can write to,
// creating it if need be.
func ownedDir(base string) error {
	if err := os.Mkdir(base, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("scratch: creating %s: %w", base, err)
	}
	info, err := os.Lstat(base)
	if err != nil {
		return fmt.Errorf("scratch: %w", err)
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	if !info.IsDir() || !ok || int(st.Uid) != os.Getuid() || info.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("scratch: %s is not a directory of uid %d that only it can write to; refusing to keep or sweep session directories there", base, os.Getuid())
	}
	return nil
}

func create(base string) (*Dir, error) {
	path, err := os.MkdirTemp(base, "")
	if err != nil {
		return nil, fmt.Errorf("scratch: creating an instance directory: %w", err)
	}
	lock, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errSwept
	}
	if err != nil {
		return nil, fmt.Errorf("scratch: opening %s: %w", path, err)
	}
	if err := flock(lock, syscall.LOCK_EX); err != nil {
		_ = lock.Close()
		return nil, fmt.Errorf("scratch: locking %s: %w", path, err)
	}
	// Locked: no sweep can remove it from now on. Make sure none did
	// before.
	held, err1 := lock.Stat()
	named, err2 := os.Stat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, named) {
		_ = lock.Close()
		return nil, errSwept
	}
	return &Dir{path: path, lock: lock}, nil
}

// sweep removes the instance directories under base whose lock can be
// taken: their gateway has died. The lock is held while removing, so a
// gateway creating a directory of the same name cannot lose it.
func sweep(base string) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		path := filepath.Join(base, e.Name())
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		if flock(f, syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(path)
		}
		_ = f.Close()
	}
}

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// Path returns the instance directory.
func (d *Dir) Path() string { return d.path }

// SessionDir creates a fresh directory for one session of agent. Its
// caller removes it when the session closes; Close removes whatever is
// left.
func (d *Dir) SessionDir(agent string) (string, error) {
	dir, err := os.MkdirTemp(d.path, agent+"-")
	if err != nil {
		return "", fmt.Errorf("scratch: creating a session directory for agent %q: %w", agent, err)
	}
	return dir, nil
}

// Close removes the instance directory with everything in it, then drops
// the lock. Agents still writing into it at that moment may leave some
// behind, which the next gateway to start sweeps away.
func (d *Dir) Close() error {
	err := os.RemoveAll(d.path)
	if cerr := d.lock.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("scratch: removing %s: %w", d.path, err)
	}
	return nil
}
