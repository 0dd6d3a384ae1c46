package main

import (
	"debug/buildinfo"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// buildAcpgate builds cmd/acpgate into a temporary directory with extra
// go build flags, from the module root so that the checkout's VCS
// information is recorded as it is for `go build` by hand.
func buildAcpgate(t *testing.T, flags ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "acpgate")
	args := append(append([]string{"build", "-o", out}, flags...), "./cmd/acpgate")
	cmd := exec.Command("go", args...)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out
}

func versionOutput(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	return string(out)
}

// A release binary prints the version and commit make release embeds, the
// Go version it was built with and the ACP protocol version it speaks:
// what a bug report needs to name the code that ran.
func TestAReleaseBinaryPrintsItsEmbeddedVersionAndCommit(t *testing.T) {
	bin := buildAcpgate(t, "-ldflags", "-X main.buildVersion=v9.8.7 -X main.buildCommit=0123456789abcdef0123456789abcdef01234567")
	want := "acpgate v9.8.7\ncommit: 0123456789abcdef0123456789abcdef01234567\ngo: " + runtime.Version() + "\nacp protocol: 1\n"
	if got := versionOutput(t, bin); got != want {
		t.Errorf("acpgate version printed\n%s\nwant\n%s", got, want)
	}
}

// A plain `go build` in a clone is not plain "devel": its version and commit
// come from the VCS information the go command records. (The go command records
// none in a git worktree or under -buildvcs=false; identity's test covers
// the decision there.)
func TestABuildFromAClonePrintsItsCommit(t *testing.T) {
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	rev := strings.TrimSpace(string(head))
	bin := buildAcpgate(t, "-buildvcs=auto")
	if info, err := buildinfo.ReadFile(bin); err != nil || !slices.ContainsFunc(info.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs.revision" }) {
		t.Skipf("the go command recorded no VCS information here (a git worktree, or GOFLAGS=-buildvcs=false): %v", err)
	}
	// The go command stamps a checkout's build with a pseudo-version that
	// names the revision (v0.0.0-<time>-<revision>, "+dirty" with local
	// changes); identity prints it, or devel-<revision> where there is none.
	got := versionOutput(t, bin)
	first, _, _ := strings.Cut(got, "\n")
	if !strings.HasPrefix(first, "acpgate ") || !strings.Contains(first, rev[:12]) || !strings.Contains(got, "\ncommit: "+rev) {
		t.Errorf("acpgate version printed\n%s\nwant a version naming %s and commit %s", got, rev[:12], rev)
	}
}

// What each kind of build prints: embedded values win; `go install …@v1.2.3`
// records the module version; a checkout's build records its revision; a
// build with none of them says devel and unknown rather than guessing.
func TestTheVersionFallsBackFromLinkerFlagsToModuleVersionToRevision(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name                    string
		embVersion, embCommit   string
		bi                      *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{"make release", "v1.0.0", "abc", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "v1.0.0", "abc"},
		{"go install at a version", "", "", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3", "unknown"},
		{"go build in a clone", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs}, "devel-0123456789ab", rev},
		{"go build with changes", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: dirty}, "devel-0123456789ab", rev + "-dirty"},
		{"no build information", "", "", nil, "devel", "unknown"},
		{"no VCS information", "", "", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel", "unknown"},
	} {
		v, commit := identity(c.embVersion, c.embCommit, c.bi)
		if v != c.wantVersion || commit != c.wantCommit {
			t.Errorf("%s: identity = %q, %q; want %q, %q", c.name, v, commit, c.wantVersion, c.wantCommit)
		}
	}
}
