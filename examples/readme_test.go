package examples_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmes are the documents whose ```go blocks must compile, relative to
// the module root. sdk/README.md is not among them: its second block is a
// _test.go file continuing the package of its first. Nor is
// examples/quickstart/README.md: its blocks are files of the quickstart's
// plugin module, and the quickstart's own test checks each equals the file
// it names and runs every step, which is more than compiling them.
var readmes = []string{"README.md"}

// snippetImports are the packages a fragment may use without importing
// them, by the name it uses.
var snippetImports = map[string]string{
	"context":  "context",
	"errors":   "errors",
	"fmt":      "fmt",
	"json":     "encoding/json",
	"log":      "log",
	"os":       "os",
	"filepath": "path/filepath",
	"slog":     "log/slog",
	"time":     "time",
	"abi":      "github.com/wasmhist/wasmhist/abi",
	"host":     "github.com/wasmhist/wasmhist/host",
	"session":  "github.com/wasmhist/wasmhist/host/session",
	"agent":    "github.com/wasmhist/wasmhist/host/agent",
	"model":    "github.com/wasmhist/wasmhist/host/agent/model",
	"offline":  "github.com/wasmhist/wasmhist/host/agent/model/offline",
	"openai":   "github.com/wasmhist/wasmhist/host/agent/model/openai",
	"reducer":  "github.com/wasmhist/wasmhist/host/agent/reducer",
	"sdk":      "github.com/wasmhist/wasmhist/sdk",
}

// snippet is one ```go block of a document.
type snippet struct {
	doc  string // path from the module root
	line int    // line of the block's first line of code in doc
	code string
}

// isFile says whether the block is a whole file rather than a fragment.
func (s snippet) isFile() bool {
	_, err := parser.ParseFile(token.NewFileSet(), "", s.code, parser.PackageClauseOnly)
	return err == nil
}

// TestREADMESnippetsCompile builds and vets every ```go block of the
// READMEs, so that what a reader copies compiles against the API as it is.
// A block that starts with a package clause is a whole file, its own
// package; any other block is a fragment of statements, compiled as the
// body of `func _()` with the imports it needs (snippetImports). Every
// block goes into one temporary directory inside the module, so module
// imports resolve, and one go build and one go vet check them all. A
// failure names the README line.
func TestREADMESnippetsCompile(t *testing.T) {
	root := filepath.Join("..")
	var snippets []snippet
	for _, doc := range readmes {
		found, err := extractGo(root, doc)
		require.NoError(t, err)
		require.NotEmpty(t, found, "%s has no ```go block: is the extraction broken?", doc)
		snippets = append(snippets, found...)
	}

	// A directory whose name starts with _ is left out of ./... patterns,
	// so a concurrent go vet ./... never sees a half-written snippet.
	dir, err := os.MkdirTemp(".", "_readme")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	offsets := map[string]snippet{} // snippet file (slash path from here) -> its block
	var pkgs []string
	for i, s := range snippets {
		pkg := filepath.Join(dir, fmt.Sprintf("s%02d", i))
		require.NoError(t, os.Mkdir(pkg, 0o755))
		src, err := s.source()
		require.NoError(t, err, "%s:%d", s.doc, s.line)
		file := filepath.Join(pkg, "snippet.go")
		require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
		offsets[filepath.ToSlash(file)] = s
		pkgs = append(pkgs, "./"+filepath.ToSlash(pkg))
	}

	for _, tool := range [][]string{{"build", "-o", os.DevNull}, {"vet"}} {
		args := append(slices.Clone(tool), pkgs...)
		out, err := exec.Command("go", args...).CombinedOutput()
		if err != nil {
			t.Fatalf("go %s of the README snippets failed:\n%s", tool[0], toDocLines(string(out), offsets))
		}
	}
}

// TestSnippetErrorsNameTheREADMELine: a compile error in a snippet file is
// reported at the README line it came from.
func TestSnippetErrorsNameTheREADMELine(t *testing.T) {
	fragment := snippet{doc: "README.md", line: 40, code: "x := 1\n"}
	src, err := fragment.source()
	require.NoError(t, err)
	lines := strings.Split(src, "\n")
	at := slices.Index(lines, "x := 1") + 1
	require.Positive(t, at, "the fragment is not in its file:\n%s", src)

	out := fmt.Sprintf("# pkg\n_readme1/s00/snippet.go:%d:1: declared and not used: x\n", at)
	got := toDocLines(out, map[string]snippet{"_readme1/s00/snippet.go": fragment})
	assert.Equal(t, "# pkg\nREADME.md:40:1: declared and not used: x\n", got)
}

// extractGo returns the ```go blocks of doc.
func extractGo(root, doc string) ([]snippet, error) {
	f, err := os.Open(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []snippet
	var cur *snippet
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{doc: doc, line: n + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: ```go block never closed", doc, cur.line-1)
	}
	return out, sc.Err()
}

// source is the Go file a snippet compiles as.
func (s snippet) source() (string, error) {
	if s.isFile() {
		return s.code, nil
	}
	body := "func _() {\n" + s.code + "}\n"
	// Names a fragment uses but does not declare are left unresolved by
	// the parser; those that name a known package are its imports.
	f, err := parser.ParseFile(token.NewFileSet(), "", "package snippet\n"+body, 0)
	if err != nil {
		return "", fmt.Errorf("not a whole file nor statements: %w", err)
	}
	var imports []string
	for _, id := range f.Unresolved {
		if path, ok := snippetImports[id.Name]; ok && !slices.Contains(imports, path) {
			imports = append(imports, path)
		}
	}
	slices.Sort(imports)
	var b strings.Builder
	b.WriteString("package snippet\n")
	for _, p := range imports {
		b.WriteString("import " + strconv.Quote(p) + "\n")
	}
	b.WriteString(body)
	return b.String(), nil
}

// firstLine is the line of the snippet's file that holds its first line of
// code.
func (s snippet) firstLine() int {
	if s.isFile() {
		return 1
	}
	src, err := s.source()
	if err != nil {
		return 1
	}
	return strings.Count(src[:strings.Index(src, "func _() {\n")], "\n") + 2
}

// compilerPos matches a position the go command reports in a snippet file.
var compilerPos = regexp.MustCompile(`(?m)^(?:vet: )?(?:\./)?(\S+/snippet\.go):(\d+)(:\d+)?`)

// toDocLines rewrites positions in snippet files into README positions.
func toDocLines(out string, snippets map[string]snippet) string {
	return compilerPos.ReplaceAllStringFunc(out, func(m string) string {
		sub := compilerPos.FindStringSubmatch(m)
		s, ok := snippets[sub[1]]
		if !ok {
			return m
		}
		n, _ := strconv.Atoi(sub[2])
		return fmt.Sprintf("%s:%d%s", s.doc, s.line+n-s.firstLine(), sub[3])
	})
}
