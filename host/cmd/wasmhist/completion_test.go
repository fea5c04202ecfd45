package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// completionDir returns a directory with what completion offers files
// from: sessions, a plugin, a file that is neither, a subdirectory and a
// directory store holding the session trip-2.
func completionDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"trip.json", "mine.wasm", "notes.txt", "store/trip-2.json"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), nil, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	return dir
}

// shellEnv is the environment a shell runs the completion in: the built
// command first in PATH, as an installed one is.
func shellEnv() []string {
	return append(os.Environ(), "PATH="+filepath.Dir(binary)+string(os.PathListSeparator)+os.Getenv("PATH"), pluginDirEnv+"="+pluginDir)
}

// completionCases are command lines typed up to the cursor (the last
// word is the one completed) and what completion must offer, and not.
var completionCases = []struct {
	name    string
	line    []string
	want    []string
	notWant []string
}{
	{"command", []string{"ses"}, []string{"session"}, nil},
	{"session subcommand", []string{"session", "va"}, []string{"validate"}, nil},
	{"flag", []string{"chat", "--pl"}, []string{"--plugin"}, nil},
	{"flag of a subcommand", []string{"session", "export", "--fo"}, []string{"--format"}, nil},
	{"no flag of another command", []string{"history", "--"}, []string{"--session", "--state-key"}, []string{"--accept-new-build", "--format"}},
	{"flag given once", []string{"chat", "--session", "trip.json", "--s"}, []string{"--status", "--store"}, []string{"--session"}},
	{"flag value", []string{"chat", "--model", "openai-"}, []string{"openai-chat", "openai-responses"}, []string{"offline"}},
	{"session file", []string{"session", "validate", ""}, []string{"trip.json", "sub"}, []string{"notes.txt", "mine.wasm", "--plugin"}},
	{"plugin", []string{"chat", "--plugin", ""}, []string{"inmemory", "sqlite", "mine.wasm", "sub"}, []string{"notes.txt"}},
	{"database", []string{"chat", "--db", ""}, []string{"postgres", "notes.txt", "sub"}, nil},
	{"session ids of a directory store", []string{"session", "show", "--store", "store", ""}, []string{"trip-2"}, []string{"trip.json"}},
	{"shell", []string{"completion", "z"}, []string{"zsh"}, nil},
	{"help", []string{"help", "conf"}, []string{"conformance"}, nil},
}

// bashScript writes 'wasmhist completion bash' to a file and returns bash
// and the file.
func bashScript(t *testing.T) (bash, script string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	require.NoError(t, err, "bash is needed to test its completion")
	script = filepath.Join(t.TempDir(), "wasmhist.bash")
	require.NoError(t, os.WriteFile(script, []byte(invocation{}.ok(t, "completion", "bash")), 0o600))
	return bash, script
}

// bashOffers calls the script's function as bash does on Tab, with
// COMP_WORDS (words after the command, as bash split them) and
// COMP_CWORD, in dir, and checks what it offers.
func bashOffers(t *testing.T, bash, script, dir string, words, want, notWant []string) {
	t.Helper()
	quoted := []string{"'wasmhist'"}
	for _, w := range words {
		quoted = append(quoted, "'"+w+"'")
	}
	prog := `source "$1" && COMP_WORDS=(` + strings.Join(quoted, " ") + `) && COMP_CWORD=$((${#COMP_WORDS[@]} - 1)) && _wasmhist && printf '%s\n' "${COMPREPLY[@]}"`
	got := strings.Split(runShell(t, dir, bash, "-c", prog, "bash", script), "\n")
	for _, w := range want {
		assert.Contains(t, got, w, "bash completion of %q", strings.Join(words, " "))
	}
	for _, w := range notWant {
		assert.NotContains(t, got, w, "bash completion of %q", strings.Join(words, " "))
	}
}

// TestBashCompletion loads 'wasmhist completion bash' into a real bash
// and calls its function as bash does on Tab, in a directory of files to
// complete.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	bash, script := bashScript(t)
	dir := completionDir(t)
	for _, tc := range completionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			bashOffers(t, bash, script, dir, tc.line, tc.want, tc.notWant)
		})
	}
}

// TestBashCompletionOfFlagEqualsValue: bash splits --flag=value at "="
// into three words; completion offers the values of a flag that takes
// one after the "=" (the value's start typed, or nothing yet), files
// among them, and nothing after a switch's "=".
func TestBashCompletionOfFlagEqualsValue(t *testing.T) {
	t.Parallel()
	bash, script := bashScript(t)
	dir := completionDir(t)
	for _, tc := range []struct {
		words   []string // as bash splits them
		want    []string
		notWant []string
	}{
		{[]string{"chat", "--model", "=", "openai-"}, []string{"openai-chat", "openai-responses"}, []string{"offline", "--plugin"}},
		{[]string{"chat", "--model", "="}, []string{"offline", "openai-chat"}, []string{"--plugin"}},
		{[]string{"chat", "--session", "=", "tr"}, []string{"trip.json"}, []string{"notes.txt"}},
		{[]string{"chat", "--model", "=", "offline", "--pl"}, []string{"--plugin"}, []string{"--model"}},
		{[]string{"inspect", "--json", "="}, nil, []string{"inmemory", "sqlite", "mine.wasm"}},
		{[]string{"inspect", "--json", "=", "in"}, nil, []string{"inmemory"}},
	} {
		bashOffers(t, bash, script, dir, tc.words, tc.want, tc.notWant)
	}
}

// TestCompleteFlagEqualsValue: a word "--flag=start", as zsh and fish
// pass it whole, completes to the flag's values in the same form; a
// switch or a flag the command lacks completes to nothing, not to the
// command's arguments.
func TestCompleteFlagEqualsValue(t *testing.T) {
	got := strings.Fields(invocation{}.ok(t, completeCommand, "chat", "--model=openai-"))
	assert.ElementsMatch(t, []string{"--model=openai-chat", "--model=openai-responses"}, got)
	got = strings.Fields(invocation{}.ok(t, completeCommand, "session", "export", "--format="))
	assert.Contains(t, got, "--format=openai")
	for _, line := range [][]string{{"inspect", "--json="}, {"cache", "--json="}, {"inspect", "--nosuch="}} {
		assert.Empty(t, strings.TrimSpace(invocation{}.ok(t, append([]string{completeCommand}, line...)...)), "%q", line)
	}
}

// TestFishCompletion loads 'wasmhist completion fish' into fish and asks
// fish what it completes (complete -C), as it does on Tab. It needs fish
// (.ci/run installs it).
func TestFishCompletion(t *testing.T) {
	t.Parallel()
	fish, err := exec.LookPath("fish")
	if err != nil {
		t.Fatal("fish is not installed; the fish completion script is checked in real fish: apt-get install fish")
	}
	script := filepath.Join(t.TempDir(), "wasmhist.fish")
	require.NoError(t, os.WriteFile(script, []byte(invocation{}.ok(t, "completion", "fish")), 0o600))
	runShell(t, "", fish, "-n", script)
	dir := completionDir(t)
	for _, tc := range completionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runShell(t, dir, fish, "--no-config", "-c", `source $argv[1]; complete -C"$argv[2]"`, script, "wasmhist "+strings.Join(tc.line, " "))
			var cands []string
			for _, l := range strings.Split(got, "\n") {
				c, _, _ := strings.Cut(l, "\t")
				cands = append(cands, strings.TrimSuffix(c, "/"))
			}
			for _, w := range tc.want {
				assert.Contains(t, cands, w, "fish completion of %q:\n%s", strings.Join(tc.line, " "), got)
			}
			for _, w := range tc.notWant {
				assert.NotContains(t, cands, w, "fish completion of %q", strings.Join(tc.line, " "))
			}
		})
	}
}

// TestZshCompletion checks that zsh parses 'wasmhist completion zsh', then
// calls its function as zsh does on Tab (words, CURRENT), with compadd and
// _files, the completion system's, standing in as what they add. It needs
// zsh (.ci/run installs it).
func TestZshCompletion(t *testing.T) {
	t.Parallel()
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		t.Fatal("zsh is not installed; the zsh completion script is checked in real zsh: apt-get install zsh")
	}
	script := filepath.Join(t.TempDir(), "_wasmhist")
	out := invocation{}.ok(t, "completion", "zsh")
	require.True(t, strings.HasPrefix(out, "#compdef wasmhist\n"), "zsh loads a completion function by its #compdef line")
	require.NoError(t, os.WriteFile(script, []byte(out), 0o600))
	runShell(t, "", zsh, "-n", script)
	const stubs = `compdef() { :; }
compadd() { [[ $1 == -a ]] && print -l -- "${(@P)2}"; }
_files() {
	case $1 in
	-/) print -l -- *(N/) ;;
	-g) print -l -- ${~2}(N) *(N/) ;;
	*) print -l -- *(N) ;;
	esac
}
`
	dir := completionDir(t)
	for _, tc := range completionCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			words := append([]string{"wasmhist"}, tc.line...)
			var quoted []string
			for _, w := range words {
				quoted = append(quoted, "'"+w+"'")
			}
			prog := stubs + `source "$1" && words=(` + strings.Join(quoted, " ") + `) && CURRENT=${#words} && _wasmhist`
			got := strings.Split(runShell(t, dir, zsh, "-f", "-c", prog, "zsh", script), "\n")
			for _, w := range tc.want {
				assert.Contains(t, got, w, "zsh completion of %q", strings.Join(tc.line, " "))
			}
			for _, w := range tc.notWant {
				assert.NotContains(t, got, w, "zsh completion of %q", strings.Join(tc.line, " "))
			}
		})
	}
}

// TestCompletionUsage: a shell the command has no script for is refused.
func TestCompletionUsage(t *testing.T) {
	t.Parallel()
	invocation{}.failsWithOneLine(t, exitUsage, []string{"completion", "tcsh"}, `"tcsh"`, "bash, zsh or fish")
	invocation{}.failsWithOneLine(t, exitUsage, []string{"completion"}, "wasmhist completion bash")
}

// runShell runs a shell and returns its standard output; it must succeed.
func runShell(t *testing.T, dir, shell string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, shell, args...)
	cmd.Dir, cmd.Env = dir, shellEnv()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s %s\nstderr: %s", shell, strings.Join(args, " "), stderr.String())
	return stdout.String()
}
