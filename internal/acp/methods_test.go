package acp

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The table of ACP methods in docs/api.md is checked against two things: the
// method list of ACP's stable schema (schema/v1/meta.json of
// agentclientprotocol/agent-client-protocol, release 1.7.0, vendored in
// testdata), and the code: a method is "supported" exactly when the
// gateway's ACP code (this package, its sub-packages and the outcome
// package, which names session/prompt) has it as a string literal, which
// every call, dispatch case and notification it handles does.

// readmeMethods parses the table under "## The ACP methods": method to
// its "acpgate" column.
func readmeMethods(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## The ACP methods\n")
	if !ok {
		t.Fatal("docs/api.md has no section \"The ACP methods\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string]string{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		method := strings.Trim(strings.TrimSpace(cells[1]), "`")
		if _, dup := rows[method]; dup {
			t.Errorf("docs/api.md lists %s twice", method)
		}
		rows[method] = strings.TrimSpace(cells[3])
	}
	return rows
}

// schemaMethods is every method name of the vendored schema list.
func schemaMethods(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "acp-schema-v1-meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	var meta map[string]json.RawMessage
	if err := json.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, side := range []string{"agentMethods", "clientMethods", "protocolMethods"} {
		var m map[string]string
		if err := json.Unmarshal(meta[side], &m); err != nil {
			t.Fatalf("%s: %v", side, err)
		}
		out = append(out, slices.Collect(maps.Values(m))...)
	}
	slices.Sort(out)
	return out
}

// codeLiterals is every string literal of the non-test Go files of dirs.
func codeLiterals(t *testing.T, dirs ...string) map[string]bool {
	t.Helper()
	found := map[string]bool{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if s, err := strconv.Unquote(lit.Value); err == nil {
						found[s] = true
					}
				}
				return true
			})
		}
	}
	return found
}

func TestTheReadmesMethodTableListsExactlyTheSchemasMethods(t *testing.T) {
	rows := readmeMethods(t)
	want := schemaMethods(t)
	got := slices.Sorted(maps.Keys(rows))
	if !slices.Equal(got, want) {
		t.Errorf("docs/api.md lists %q\nthe schema has    %q", got, want)
	}
	for method, support := range rows {
		if !slices.Contains([]string{"supported", "not used", "refused", "ignored"}, support) {
			t.Errorf("%s: unknown support %q", method, support)
		}
	}
}

func TestAMethodIsSupportedInTheReadmeExactlyWhenTheCodeNamesIt(t *testing.T) {
	named := codeLiterals(t, append(subPackages(t), ".", filepath.Join("..", "..", "outcome"))...)
	for method, support := range readmeMethods(t) {
		if named[method] != (support == "supported") {
			t.Errorf("%s: docs/api.md says %q, but the code %s it", method, support, map[bool]string{true: "names", false: "never names"}[named[method]])
		}
	}
}

// subPackages is every directory below this one that holds Go files.
func subPackages(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if files, _ := filepath.Glob(filepath.Join(path, "*.go")); len(files) > 0 {
			dirs = append(dirs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dirs
}
