package clientreq

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/acp/jsonrpc"
)

// The path an agent names is checked (confine), then opened; the agent can
// change it in between. These tests open paths that changed after the
// check, as the agent would have left them.

func TestOpeningAFIFOInTheWorkspaceReturnsAtOnceAsNotARegularFile(t *testing.T) {
	cwd, _ := filepath.EvalSymlinks(t.TempDir())
	fifo := filepath.Join(cwd, "notes.txt")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	files := NewFiles(FSAccess{}, cwd)
	for _, c := range []struct {
		name string
		flag int
	}{
		{"read", os.O_RDONLY},
		{"write", os.O_WRONLY | os.O_CREATE | os.O_TRUNC},
	} {
		done := make(chan *jsonrpc.ErrorObject, 1)
		go func() {
			f, _, rpcErr := files.openInWorkspace(fifo, fifo, c.flag, 0o644)
			if f != nil {
				_ = f.Close()
			}
			done <- rpcErr
		}()
		select {
		case rpcErr := <-done:
			if rpcErr == nil || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "is not a regular file") {
				t.Errorf("%s of a FIFO: %v, want invalid params, not a regular file", c.name, rpcErr)
			}
		case <-time.After(5 * time.Second):
			// The goroutine stays blocked in open(2); the test process ends.
			t.Fatalf("%s of a FIFO with nobody at its other end did not return in 5 s", c.name)
		}
	}
}

func TestAPathThatBecameASymlinkOutOfTheWorkspaceIsNotOpened(t *testing.T) {
	cwd, _ := filepath.EvalSymlinks(t.TempDir())
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("TOP SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What confine saw: a directory of the workspace. What the agent made
	// of it before the open: a symlink to a directory outside.
	if err := os.Symlink(outside, filepath.Join(cwd, "docs")); err != nil {
		t.Fatal(err)
	}
	files := NewFiles(FSAccess{}, cwd)
	for _, c := range []struct {
		name, file string
		flag       int
	}{
		{"read", "secret.txt", os.O_RDONLY},
		{"write", "planted.txt", os.O_WRONLY | os.O_CREATE | os.O_TRUNC},
	} {
		path := filepath.Join(cwd, "docs", c.file)
		f, _, rpcErr := files.openInWorkspace(path, path, c.flag, 0o644)
		if f != nil {
			_ = f.Close()
			t.Errorf("%s through a symlink out of the workspace opened %s", c.name, f.Name())
		}
		if rpcErr == nil {
			t.Errorf("%s through a symlink out of the workspace: no error", c.name)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted.txt")); err == nil {
		t.Error("a write through the symlink created a file outside the workspace")
	}
}
