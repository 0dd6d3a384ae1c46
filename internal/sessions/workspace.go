package sessions

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/config"
)

// sessionDir resolves a session's working directory. With a configured
// workspace, cwd is relative to it and must stay inside it; without one the
// session gets a fresh temporary directory from newTemp, removed when it
// closes. rel is dir relative to the (symlink-free) workspace or temporary
// directory: what a session's record keeps.
func sessionDir(a config.Agent, cwd string, newTemp func(agent string) (string, error)) (dir, rel, tempDir string, err error) {
	if strings.ContainsRune(cwd, 0) {
		return "", "", "", status.Error(codes.InvalidArgument, "cwd contains a NUL byte")
	}
	if filepath.IsAbs(cwd) {
		return "", "", "", status.Errorf(codes.InvalidArgument, "cwd %q is absolute: it must be relative to %s", cwd, workspaceOf(a))
	}
	root := a.Workspace
	if root == "" {
		if root, err = newTemp(a.Name); err != nil {
			return "", "", "", status.Errorf(codes.Internal, "creating a session directory: %v", err)
		}
		tempDir = root
	}
	fail := func(err error) (string, string, string, error) {
		if tempDir != "" {
			_ = os.RemoveAll(tempDir)
		}
		return "", "", "", err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return fail(status.Errorf(codes.FailedPrecondition, "agent %q's workspace is unusable: %v", a.Name, err))
	}
	target, err := filepath.EvalSymlinks(filepath.Join(realRoot, cwd))
	if err != nil {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q does not exist in %s", cwd, workspaceOf(a)))
	}
	rel, err = filepath.Rel(realRoot, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q leaves %s", cwd, workspaceOf(a)))
	}
	if info, err := os.Stat(target); err != nil || !info.IsDir() {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q is not a directory", cwd))
	}
	return target, rel, tempDir, nil
}

// workspaceOf names the directory a cwd is relative to, for an error about
// one, and says how to set it: an operator whose agent has no workspace
// learns that sessions start in an empty temporary directory and that
// agents[].workspace gives it one, rather than guessing at paths.
func workspaceOf(a config.Agent) string {
	if a.Workspace == "" {
		return fmt.Sprintf("agent %q's session directory: the agent has no workspace, so each session starts in an empty "+
			"temporary directory (agents[].workspace in the gateway's configuration sets one)", a.Name)
	}
	// The path is the gateway's to know, not the caller's.
	return fmt.Sprintf("agent %q's workspace (agents[].workspace in the gateway's configuration)", a.Name)
}
