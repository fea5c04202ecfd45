package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
)

// cloneDir is what the README calls the clone of wasmhist.
const cloneDir = "/path/to/wasmhist"

// block is one fenced code block of the README.
type block struct {
	lang string
	// file is the name the README gives a go block ("`main.go`:" on the
	// line before it).
	file string
	text string
}

// readmeBlocks returns the README's fenced code blocks in order.
func readmeBlocks(t *testing.T, readme string) []block {
	t.Helper()
	var (
		blocks []block
		cur    *block
		prev   string
	)
	sc := bufio.NewScanner(strings.NewReader(readme))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur == nil && strings.HasPrefix(line, "```"):
			cur = &block{lang: strings.TrimPrefix(line, "```")}
			if name, ok := strings.CutSuffix(prev, "`:"); ok && strings.HasPrefix(name, "`") {
				cur.file = strings.TrimPrefix(name, "`")
			}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		case line != "":
			prev = line
		}
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "README.md has an unclosed code block")
	return blocks
}

// Test_main follows the quickstart (../README.md) as a reader would: the
// README's code blocks, in order, become one shell script run in a
// directory outside the repository, with /path/to/wasmhist the module
// root. sh blocks run as they are, go blocks are written to the file the
// README names, and a console block's command runs with its output
// compared with the one shown. The go blocks must be this directory's
// files, so the plugin the repository tests is the one the README shows.
func Test_main(t *testing.T) {
	if testing.Short() {
		t.Skip("installs wasmhist and builds a plugin module from scratch")
	}
	b, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	readme := string(b)
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	require.NoError(t, err)
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(gomod), "module github.com/wasmhist/wasmhist\n"), "%s is not the wasmhist module root", root)

	work := t.TempDir()
	outDir := filepath.Join(work, "out")
	require.NoError(t, os.Mkdir(outDir, 0o755))
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	type console struct{ out, want string }
	var consoles []console
	var files, shells int
	for _, bl := range readmeBlocks(t, readme) {
		switch bl.lang {
		case "sh":
			shells++
			script.WriteString(strings.ReplaceAll(bl.text, cloneDir, root))
		case "go":
			require.NotEmpty(t, bl.file, "a go block in README.md without a \"`FILE.go`:\" line before it")
			src, err := os.ReadFile(bl.file)
			require.NoError(t, err, "README.md shows %s, which this directory does not have", bl.file)
			// Not require.Equal: its message would print both files.
			require.True(t, string(src) == bl.text, "README.md does not show %s as it is: copy %s into the README's ```go block", bl.file, bl.file)
			files++
			fmt.Fprintf(&script, "cat > %s <<'QUICKSTART_EOF'\n%sQUICKSTART_EOF\n", bl.file, bl.text)
		case "console":
			cmd, want, ok := strings.Cut(bl.text, "\n")
			require.True(t, ok && strings.HasPrefix(cmd, "$ "), "console block %q: want a $ command line, then its output", cmd)
			c := console{out: filepath.Join(outDir, fmt.Sprintf("console-%d", len(consoles))), want: want}
			consoles = append(consoles, c)
			// The command's output, error output and exit status, kept
			// apart, whether it succeeds or not; then shown.
			fmt.Fprintf(&script, "set +e\n%s >%[2]s.out 2>%[2]s.err\necho $? >%[2]s.status\nset -e\ncat %[2]s.out %[2]s.err\n", strings.TrimPrefix(cmd, "$ "), c.out)
		default:
			t.Fatalf("README.md has a ```%s block: the test runs sh, go and console blocks only", bl.lang)
		}
	}
	// Every step has something to run; a README without them tests nothing.
	require.GreaterOrEqual(t, shells, 5, "sh blocks in README.md")
	require.Equal(t, 2, files, "go blocks in README.md (main.go, conformance_test.go)")
	require.Len(t, consoles, 2, "console blocks in README.md (conformance, the refused chat of step 6)")

	cmd := exec.CommandContext(t.Context(), "bash", "-c", script.String())
	cmd.Dir = work
	cmd.Env = quickstartEnv(work)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the quickstart's steps failed; the script:\n%s\noutput:\n%s", script.String(), out)

	read := func(c console, what string) string {
		b, err := os.ReadFile(c.out + "." + what)
		require.NoError(t, err)
		return string(b)
	}
	require.Equal(t, "0\n", read(consoles[0], "status"), "conformance failed:\n%s", read(consoles[0], "err"))
	got := read(consoles[0], "out")
	header, table, _ := strings.Cut(got, "\n\n")
	assert.True(t, strings.HasPrefix(header, "conformance of recent 0.1.0 (sha256 "), "conformance header:\n%s", got)
	_, wantTable, _ := strings.Cut(consoles[0].want, "\n\n")
	assert.Equal(t, wantTable, table, "README.md's conformance table differs from the real one")
	assert.True(t, strings.HasSuffix(table, "18 cases: 16 passed, 0 failed, 2 skipped\n"), "the quickstart plugin must pass every case:\n%s", got)

	assert.Contains(t, string(out), "assistant: You told me you like Italian food.", "a new process did not remember")
	assert.Contains(t, string(out), "4 messages", "history through the plugin's list export")
	assert.Contains(t, string(out), "ok  \texample.com/recent", "the native conformance test of step 7")

	// Step 6: the rebuilt plugin's chat is refused in the one line shown,
	// naming the flag, and nothing else is printed; accepted, the session
	// goes on with its history.
	refusal := consoles[1]
	assert.Equal(t, "1\n", read(refusal, "status"), "the chat with a rebuilt plugin was not refused")
	assert.Empty(t, read(refusal, "out"), "the refused chat answered")
	assert.Equal(t, anySum.ReplaceAllString(refusal.want, "SUM"), anySum.ReplaceAllString(read(refusal, "err"), "SUM"), "README.md's refusal differs from the real one")
	assert.Contains(t, refusal.want, "--accept-new-build")
	assert.Equal(t, 2, strings.Count(string(out), "assistant: You told me you like Italian food."), "the accepted build did not continue the session's history:\n%s", out)
	assert.Contains(t, string(out), "revision 4", "the chat after accepting needs no flag")
}

// anySum matches the sha256 prefix a message names a build by: a rebuild
// by another Go toolchain has another.
var anySum = regexp.MustCompile(`\b[0-9a-f]{12}\b`)

// quickstartEnv is the reader's environment, but with the command and
// the sample plugins installed under work, and module settings at Go's
// defaults: no -mod flag (go.mod must be right as the steps leave it) and
// no workspace. The build and module caches are kept, so only the module
// proxy is reached, and only for what the caches lack.
func quickstartEnv(work string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "GOBIN", "XDG_DATA_HOME", "GOWORK", "GOFLAGS", "PATH", "GOOS", "GOARCH":
			if k == "GOFLAGS" {
				var keep []string
				for _, f := range strings.Fields(v) {
					if !strings.HasPrefix(f, "-mod=") && !strings.HasPrefix(f, "-modfile=") {
						keep = append(keep, f)
					}
				}
				env = append(env, "GOFLAGS="+strings.Join(keep, " "))
			}
			continue
		}
		env = append(env, kv)
	}
	bin := filepath.Join(work, "bin")
	return append(env,
		"GOBIN="+bin,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_DATA_HOME="+filepath.Join(work, "data"),
		"GOWORK=off",
	)
}

// TestListPastTheEnd: a cursor at or past the end of the history (one
// issued before a clear, say) is an empty last page, not an error (SPEC
// section 4.4); a cursor that is not an index is invalid_argument.
func TestListPastTheEnd(t *testing.T) {
	state := []byte(`{"messages":[{"role":"user"},{"role":"assistant"}]}`)
	for _, cursor := range []string{"2", "3", "1000"} {
		resp, err := provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: cursor, Limit: 1})
		require.NoError(t, err, "cursor %s", cursor)
		assert.Empty(t, resp.Messages, "cursor %s", cursor)
		assert.Empty(t, resp.NextCursor, "cursor %s", cursor)
	}
	_, err := provider{}.List(t.Context(), &abi.ListRequest{State: state, Cursor: "x"})
	require.ErrorIs(t, err, abi.ErrInvalidArgument)
}
