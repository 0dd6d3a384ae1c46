package server

import (
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
		return "", "", "", status.Errorf(codes.InvalidArgument, "cwd %q must be relative to the agent's workspace", cwd)
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
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q does not exist in the agent's workspace", cwd))
	}
	rel, err = filepath.Rel(realRoot, target)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q leaves the agent's workspace", cwd))
	}
	if info, err := os.Stat(target); err != nil || !info.IsDir() {
		return fail(status.Errorf(codes.InvalidArgument, "cwd %q is not a directory", cwd))
	}
	return target, rel, tempDir, nil
}
