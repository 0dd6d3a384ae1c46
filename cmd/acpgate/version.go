package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/acpgate/acpgate/internal/exitcode"

	"github.com/acpgate/acpgate/internal/acp"
)

// buildVersion and buildCommit are set at link time by `make release` and
// `make image` (-ldflags -X main.buildVersion=… -X main.buildCommit=…).
// Empty, as after `go build` or `go install`, the build information is
// asked instead (see buildIdentity).
var buildVersion, buildCommit string

var versionCommand = clientCommand{
	name: "version", brief: "print the version",
	summary: "print acpgate's version, the commit it was built from, its Go version and the ACP protocol version it speaks",
	run: func(_ context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		if fs.NArg() != 0 {
			return usageError(fs, stderr, "version takes no arguments")
		}
		v, commit := buildIdentity()
		fmt.Fprintf(stdout, "acpgate %s\ncommit: %s\ngo: %s\nacp protocol: %d\n", v, commit, runtime.Version(), acp.ProtocolVersion)
		return exitcode.OK
	},
}

// version is acpgate's version, as `acpgate version` prints it and the
// gateway reports it.
func version() string {
	v, _ := buildIdentity()
	return v
}

// buildIdentity is the version and commit acpgate was built from: those
// embedded at link time, else the build information's: the module version
// `go install …@v1.2.3` records, and the VCS revision `go build` records
// in a checkout (with "-dirty" when the tree had changes). A build with
// neither is "devel", commit "unknown": a version that names nothing would
// send a bug report to the wrong code.
func buildIdentity() (version, commit string) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = nil
	}
	return identity(buildVersion, buildCommit, bi)
}

// identity is buildIdentity's decision, given what was embedded and the
// build information (nil when the binary has none).
func identity(embeddedVersion, embeddedCommit string, bi *debug.BuildInfo) (version, commit string) {
	version, commit = embeddedVersion, embeddedCommit
	var revision string
	if bi != nil {
		var modified bool
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if revision != "" && modified {
			revision += "-dirty"
		}
		if version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			version = bi.Main.Version
		}
	}
	if version == "" && revision != "" {
		version = "devel-" + shortRevision(revision)
	}
	return orDefault(version, "devel"), orDefault(orDefault(commit, revision), "unknown")
}

// shortRevision is a commit hash's first 12 characters, as a version suffix.
func shortRevision(r string) string {
	if len(r) > 12 && r[12] != '-' {
		return r[:12]
	}
	return r
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
