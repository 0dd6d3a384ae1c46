package sandbox

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestArgvRunsTheLauncherWithTheWorkspaceTheConfiguredPathsAndTheResolvedCommand(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	prog, argv, err := Argv("/opt/acpgate", Policy{RW: []string{"/srv/cache"}, RO: []string{"/srv/a", "/srv/b"}, Required: true}, "/srv/sessions/s1", "sh", []string{"-c", "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	if prog != "/opt/acpgate" {
		t.Errorf("program %q, want the launcher", prog)
	}
	want := []string{Command, "--landlock", "--required", "--rw", "/srv/sessions/s1", "--rw", "/srv/cache", "--ro", "/srv/a", "--ro", "/srv/b", "--", argv[len(argv)-3], "-c", "echo hi"}
	if !reflect.DeepEqual(argv, want) || !strings.HasSuffix(argv[len(argv)-3], "/sh") || !strings.HasPrefix(argv[len(argv)-3], "/") {
		t.Errorf("argv %q, want %q with sh resolved to an absolute path", argv, want)
	}
}

func TestArgvRefusesACommandThatCannotBeFound(t *testing.T) {
	if _, _, err := Argv("/opt/acpgate", Policy{}, "/srv/sessions", "no-such-agent-anywhere", nil); err == nil {
		t.Error("a missing command was accepted")
	}
}

func TestTheLauncherFailsWithoutExecutingOnBadArguments(t *testing.T) {
	cases := []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--rw"}, 126, "--rw wants a value"},
		{[]string{"--bogus", "--", "/bin/true"}, 126, `unknown flag "--bogus"`},
		{[]string{"--rw", "/tmp"}, 126, "usage:"},
		{[]string{"--", "/nonexistent/agent"}, 127, "no such file"},
	}
	for _, c := range cases {
		var stderr strings.Builder
		if code := Main(c.args, &stderr); code != c.code || !strings.Contains(stderr.String(), c.says) {
			t.Errorf("Main(%q) = %d, %q; want %d saying %q", c.args, code, stderr.String(), c.code, c.says)
		}
	}
}

func TestContainJoinsTheSandboxesLauncherRunAndWrapsAnyOtherCommand(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	flags := ContainFlags(true, true, 65534, 65534)
	if want := []string{"--proc", "--map-ids", "65534:65534"}; !reflect.DeepEqual(flags, want) {
		t.Fatalf("flags %q, want %q", flags, want)
	}
	self, boxed, err := Argv("/opt/acpgate", Policy{}, "/srv/s1", "sh", []string{"-c", "x"})
	if err != nil {
		t.Fatal(err)
	}
	prog, argv, err := Contain("/opt/acpgate", flags, self, boxed)
	if want := slices.Concat(boxed[:1], flags, boxed[1:]); err != nil || prog != "/opt/acpgate" || !reflect.DeepEqual(argv, want) {
		t.Errorf("a sandboxed agent: %q %q (%v), want one launcher run %q", prog, argv, err, want)
	}
	prog, argv, err = Contain("/opt/acpgate", flags, "sh", []string{"-c", "x"})
	if want := slices.Concat([]string{Command}, flags, []string{"--", boxed[len(boxed)-3], "-c", "x"}); err != nil || prog != "/opt/acpgate" || !reflect.DeepEqual(argv, want) {
		t.Errorf("a plain agent: %q %q (%v), want %q", prog, argv, err, want)
	}
	// The probe's own launcher run has no "--": it is wrapped, not joined.
	launcher, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, argv, err = Contain(launcher, flags, launcher, ProbeArgs())
	if want := slices.Concat([]string{Command}, flags, []string{"--", launcher}, ProbeArgs()); err != nil || !reflect.DeepEqual(argv, want) {
		t.Errorf("the probe: %q (%v), want %q", argv, err, want)
	}
}
