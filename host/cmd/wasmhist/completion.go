package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// completeCommand is the hidden command the completion scripts call with
// the words typed so far: the command itself says what may come next, from
// the flag sets its commands build, so that a script never lists a flag
// the command lacks (see RATIONALE, "Why does completion ask the
// command?").
const completeCommand = "__complete"

// completionShells are the scripts 'wasmhist completion' prints.
var completionShells = map[string]string{"bash": bashCompletion, "zsh": zshCompletion, "fish": fishCompletion}

func runCompletion(_ context.Context, e *env, args []string) error {
	const cmd = "completion"
	fs := flagSet(e, cmd, helpText{
		usage:   "bash|zsh|fish",
		summary: "Prints a script that completes wasmhist's commands, flags, files and choices in a shell.",
		examples: []string{
			"wasmhist completion bash > ~/.local/share/bash-completion/completions/wasmhist",
			"wasmhist completion zsh > ~/.zfunc/_wasmhist",
			"wasmhist completion fish > ~/.config/fish/completions/wasmhist.fish",
		},
		details: "  bash: source the script from ~/.bashrc, or put it where bash-completion loads it (above).\n" +
			"  zsh: put it in a directory of $fpath as _wasmhist, then run compinit.\n" +
			"  fish: put it in ~/.config/fish/completions.\n" +
			"  The script asks the command what may come next, so it stays right when wasmhist changes.\n" +
			"  A value written --flag=VALUE completes as after --flag; file names there only in bash.",
	})
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || completionShells[pos[0]] == "" {
		return usagef(cmd, "want one shell, bash, zsh or fish, got %q: use 'wasmhist completion bash'", strings.Join(pos, " "))
	}
	_, err = fmt.Fprint(e.stdout, completionShells[pos[0]])
	return err
}

// runComplete prints, one a line, the words that may replace the last of
// words (the word being completed, "" for a new one), each starting with
// it, then, when file names fit there too, a directive line: ":files" for
// any file, ":files EXT" for files ending in EXT (and directories), ":dirs"
// for directories. It always succeeds: a completion that fails shows
// nothing rather than an error amid the user's command line.
func runComplete(e *env, words []string) int {
	if len(words) == 0 {
		words = []string{""}
	}
	before, cur := words[:len(words)-1], words[len(words)-1]
	if n := len(before); n > 0 && strings.HasPrefix(before[n-1], "-") && strings.HasSuffix(before[n-1], "=") {
		// "--flag=" then the value: how the bash script passes a word
		// bash split at "=". The value completes as after "--flag",
		// files included, if the flag takes one.
		flagName := strings.TrimSuffix(before[n-1], "=")
		before = append(slices.Clone(before[:n-1]), flagName)
		if !takesValue(e, before[:n-1], strings.TrimLeft(flagName, "-")) {
			return exitOK
		}
	} else if flagName, value, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(flagName, "-") {
		// --flag=value in one word, as zsh and fish pass it: the named
		// values of a flag that takes one, each whole (files after "="
		// complete in bash only).
		if takesValue(e, before, strings.TrimLeft(flagName, "-")) {
			cands, _ := complete(e, append(slices.Clone(before), flagName))
			for _, c := range cands {
				if strings.HasPrefix(c, value) && !strings.HasPrefix(c, "-") {
					fmt.Fprintln(e.stdout, flagName+"="+c)
				}
			}
		}
		return exitOK
	}
	cands, directive := complete(e, before)
	for _, c := range cands {
		// Flags only once a dash is typed, as the shells' own do.
		if strings.HasPrefix(c, cur) && (c[0] != '-' || cur != "") {
			fmt.Fprintln(e.stdout, c)
		}
	}
	if directive != "" && !strings.HasPrefix(cur, "-") {
		fmt.Fprintln(e.stdout, directive)
	}
	return exitOK
}

// takesValue reports whether the command that words start with has a flag
// name that takes a value (is known, and is not a switch).
func takesValue(e *env, words []string, name string) bool {
	if len(words) == 0 {
		return false
	}
	path := words[:1]
	if words[0] == "session" && len(words) > 1 {
		path = words[:2]
	}
	fs := commandFlags(e, path)
	if fs == nil {
		return false
	}
	f := fs.Lookup(name)
	return f != nil && !isBoolFlag(f)
}

// complete returns what may follow the words before the one completed.
func complete(e *env, before []string) (cands []string, directive string) {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	if len(before) == 0 {
		return append(names, "help"), ""
	}
	path, rest := before[:1], before[1:]
	switch before[0] {
	case "help":
		switch {
		case len(rest) == 0:
			return names, ""
		case len(rest) == 1 && rest[0] == "session":
			return sessionSubcommandNames(), ""
		case len(rest) == 1 && rest[0] == "new":
			return []string{"plugin"}, ""
		}
		return nil, ""
	case "completion":
		if len(rest) == 0 {
			return []string{"bash", "fish", "zsh"}, ""
		}
		return nil, ""
	case "session":
		if len(rest) == 0 {
			return sessionSubcommandNames(), ""
		}
		path, rest = before[:2], before[2:]
	}
	fs := commandFlags(e, path)
	if fs == nil {
		return nil, ""
	}
	// Walk the words as parse would: a flag that takes a value consumes
	// the next word.
	values := map[string]string{}
	var positional []string
	var pending *flag.Flag
	for _, w := range rest {
		if pending != nil {
			values[pending.Name], pending = w, nil
			continue
		}
		if len(w) < 2 || w[0] != '-' {
			positional = append(positional, w)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(w, "-"), "=")
		f := fs.Lookup(name)
		switch {
		case f == nil:
		case hasValue || isBoolFlag(f):
			values[name] = value
		default:
			pending = f
		}
	}
	if pending != nil {
		return flagValues(pending.Name, values)
	}
	// A flag is offered where a word may start with "-": the shells
	// show them once the user types a dash.
	fs.VisitAll(func(f *flag.Flag) {
		if _, given := values[f.Name]; !given {
			dash := "--"
			if len(f.Name) == 1 {
				dash = "-"
			}
			cands = append(cands, dash+f.Name)
		}
	})
	args, dir := arguments(strings.Join(path, " "), positional, values)
	return append(args, cands...), dir
}

// arguments is what may come as the next positional argument of cmd.
func arguments(cmd string, positional []string, values map[string]string) ([]string, string) {
	switch cmd {
	case "inspect", "conformance":
		return builtinPlugins, ":files .wasm"
	case "session validate", "session show", "session delete", "session export", "session fork":
		return sessionArgs(values)
	case "session import":
		return nil, ":files .json"
	case "session list":
		return nil, ":dirs"
	case "cache":
		if len(positional) == 0 {
			return []string{"show", "clear"}, ""
		}
	case "postgres":
		if len(positional) == 0 {
			return []string{"rotate-key"}, ""
		}
	case "new":
		if len(positional) == 0 {
			return []string{"plugin"}, ""
		}
	}
	return nil, ""
}

// flagValues is what may follow the flag called name.
func flagValues(name string, values map[string]string) ([]string, string) {
	switch name {
	case "plugin":
		return builtinPlugins, ":files .wasm"
	case "session":
		return sessionArgs(values)
	case "store", "from", "to", "db":
		return []string{"postgres"}, ":files"
	case "config-file":
		return nil, ":files .json"
	case "dir", "wasmhist":
		return nil, ":dirs"
	case "model":
		return modelChoices, ""
	case "format":
		return []string{formatWasmhist, formatOpenAI}, ""
	}
	return nil, ""
}

// sessionArgs names sessions: with --store a directory, the ids of its
// sessions (reading a database to list ids would make a key press open
// it); otherwise session files.
func sessionArgs(values map[string]string) ([]string, string) {
	dir := values["store"]
	if dir == "" {
		return nil, ":files .json"
	}
	var ids []string
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		matches, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		for _, m := range matches {
			ids = append(ids, strings.TrimSuffix(filepath.Base(m), ".json"))
		}
	}
	return ids, ""
}

func sessionSubcommandNames() []string {
	var names []string
	for _, c := range sessionCommands() {
		names = append(names, c.name)
	}
	return names
}

// commandFlags returns the flag set the command at path builds, without
// running it (env.describe), or nil for no such command.
func commandFlags(e *env, path []string) *flags {
	var got *flags
	d := &env{stdin: e.stdin, stdout: e.stdout, stderr: e.stderr, getenv: e.getenv, describe: func(fs *flags) { got = fs }}
	for _, c := range commands() {
		if c.name != path[0] {
			continue
		}
		err := c.run(context.Background(), d, append(slices.Clone(path[1:]), "--help"))
		if !errors.Is(err, errDescribed) {
			return nil
		}
	}
	return got
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// The scripts call the command they complete (the first word typed, so
// that ./wasmhist completes too) with the words up to the cursor, and turn
// its directive into the shell's own file completion.

const bashCompletion = `# bash completion for wasmhist; source it, or install it with
#   wasmhist completion bash > ~/.local/share/bash-completion/completions/wasmhist
_wasmhist() {
    local cur=${COMP_WORDS[COMP_CWORD]} line ext i
    local -a words=()
    # bash splits --flag=value at "=" (COMP_WORDBREAKS): the command is
    # asked about "--flag= value", and after a bare "=" about "--flag= ''".
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} == "=" && ${COMP_WORDS[i-1]} == -* ]]; then
            words[${#words[@]}-1]+="="
        else
            words+=("${COMP_WORDS[i]}")
        fi
    done
    if [[ $cur == "=" && ${COMP_WORDS[COMP_CWORD-1]} == -* ]]; then
        words[${#words[@]}-1]+="="
        cur=
    fi
    words+=("$cur")
    COMPREPLY=()
    while IFS= read -r line; do
        case $line in
        :files)
            compopt -o filenames 2>/dev/null
            COMPREPLY+=($(compgen -f -- "$cur")) ;;
        ":files "*)
            ext=${line#:files }
            compopt -o filenames 2>/dev/null
            COMPREPLY+=($(compgen -f -X "!*$ext" -- "$cur") $(compgen -d -- "$cur")) ;;
        :dirs)
            compopt -o filenames 2>/dev/null
            COMPREPLY+=($(compgen -d -- "$cur")) ;;
        *) COMPREPLY+=("$line") ;;
        esac
    done < <("${COMP_WORDS[0]}" ` + completeCommand + ` "${words[@]}" 2>/dev/null)
    return 0
}
complete -F _wasmhist wasmhist
`

const zshCompletion = `#compdef wasmhist
# zsh completion for wasmhist; install it in a directory of $fpath with
#   wasmhist completion zsh > ~/.zfunc/_wasmhist
_wasmhist() {
    local -a cands
    local line
    for line in "${(@f)$("${words[1]}" ` + completeCommand + ` "${(@)words[2,CURRENT]}" 2>/dev/null)}"; do
        case $line in
        :files) _files ;;
        ":files "*) _files -g "*${line#:files }" ;;
        :dirs) _files -/ ;;
        ?*) cands+=("$line") ;;
        esac
    done
    (( ${#cands} )) && compadd -a cands
    return 0
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    _wasmhist "$@"
else
    compdef _wasmhist wasmhist
fi
`

const fishCompletion = `# fish completion for wasmhist; install it with
#   wasmhist completion fish > ~/.config/fish/completions/wasmhist.fish
function __wasmhist_complete
    set -l words (commandline -opc)
    set -l cmd $words[1]
    set -e words[1]
    set -l cur (commandline -ct)
    for line in ($cmd ` + completeCommand + ` $words $cur 2>/dev/null)
        switch $line
            case ':files'
                __fish_complete_path $cur
            case ':files *'
                set -l ext (string replace ':files ' '' -- $line)
                for f in (__fish_complete_path $cur)
                    set -l name (string split -f1 \t -- $f)
                    if string match -q -- '*/' $name; or string match -q -- "*$ext" $name
                        echo $f
                    end
                end
            case ':dirs'
                __fish_complete_directories $cur
            case '*'
                echo $line
        end
    end
end
complete -c wasmhist -f -a '(__wasmhist_complete)'
`
