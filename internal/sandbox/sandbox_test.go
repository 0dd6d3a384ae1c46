package sandbox

import (
	"reflect"
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
