package exitcode

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// A class added to the contract needs an exit code decided for it, not the
// fallback by accident.
func TestEveryHarnessErrorClassHasAnExitCode(t *testing.T) {
	arms := (&acpgatev1.HarnessError{}).ProtoReflect().Descriptor().Oneofs().ByName("kind").Fields()
	for i := range arms.Len() {
		if name := string(arms.Get(i).Name()); ClassExits[name] == 0 {
			t.Errorf("class %q has no entry in ClassExits", name)
		}
	}
	if len(ClassExits) != arms.Len() {
		t.Errorf("ClassExits has %d entries, HarnessError has %d classes", len(ClassExits), arms.Len())
	}
}

// The examples promise `acpgate prompt`'s exit code for each error class: each
// of them must map every class of ClassExits to that code, so a class added
// to the contract (gateway, 11, was once missing from all three) is not left
// to an example's fallback.
func TestTheExamplesExitWithTheCLIsCodeForEveryClass(t *testing.T) {
	for _, path := range []string{"../../examples/go/main.go", "../../examples/python/prompt.py", "../../examples/node/prompt.mjs"} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		for class, code := range ClassExits {
			// The Go example names the oneof arm's type, the others its
			// field name.
			token := `"` + class + `"`
			if strings.HasSuffix(path, ".go") {
				token = "HarnessError_" + camel(class) + ":"
			}
			want := fmt.Sprintf("return %d", code)
			found := false
			for i, line := range lines {
				if !strings.Contains(line, token) {
					continue
				}
				for _, next := range lines[i:min(i+16, len(lines))] {
					if strings.Contains(next, want) {
						found = true
						break
					}
				}
			}
			if !found {
				t.Errorf("%s: class %s does not return %d, acpgate prompt's exit code for it", path, class, code)
			}
		}
	}
}

// camel turns a class name into its Go type's suffix: stale_target → StaleTarget.
func camel(class string) string {
	var b strings.Builder
	for word := range strings.SplitSeq(class, "_") {
		b.WriteString(strings.ToUpper(word[:1]) + word[1:])
	}
	return b.String()
}

func TestTheTableHasOneRowForEveryCode(t *testing.T) {
	md := Table()
	if !strings.HasPrefix(md, "| exit code | meaning |\n|---|---|\n") {
		t.Errorf("table header:\n%s", md)
	}
	for _, code := range []int{OK, Usage, Transport, Protocol, Harness, PolicyRefused,
		Cancelled, AuthRequired, Capability, StaleTarget, GatewayFailure, InvalidArgument, Rejected, GatewayUnavailable} {
		if strings.Count(md, "\n| "+strconv.Itoa(code)+" | ") != 1 {
			t.Errorf("table lacks exactly one row for %d:\n%s", code, md)
		}
	}
	if n := strings.Count(md, "\n"); n != len(table)+2 {
		t.Errorf("table has %d lines, want %d", n, len(table)+2)
	}
}
