package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"text/template"
)

// wasmhistModule is the module path a generated plugin's replace points at.
const wasmhistModule = "github.com/wasmhist/wasmhist"

// pluginName is what `new plugin` accepts as a NAME: it becomes the
// plugin's name (SPEC section 3: 1-64 of a-z, 0-9, - and _, starting with
// a letter or digit), the last element of its module path and its
// directory, which all accept such a name.
// Compiled on first use: its 62 optional copies cost every process of the
// command, `chat` included, about 0.1 M instructions at initialisation.
var pluginName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`) })

func runNew(_ context.Context, e *env, args []string) error {
	const cmd = "new"
	fs := flagSet(e, cmd, helpText{
		usage: "plugin NAME [--sql] [--dir DIR] [--module PATH] [--wasmhist PATH]",
		summary: "Writes a new plugin module that builds and passes conformance: go.mod, main.go,\n" +
			"conformance_test.go and a Makefile that builds NAME.wasm.",
		examples: []string{"wasmhist new plugin notes --wasmhist ~/src/wasmhist --dir notes"},
		details: "  main.go is the quickstart's provider, which keeps a session's messages in its state;\n" +
			"  with --sql, the sqlite sample's provider, which keeps them in a database the host grants\n" +
			"  (SQLite or PostgreSQL). wasmhist is not published, so go.mod replaces it with a clone:\n" +
			"  --wasmhist, or the wasmhist module the current directory is in.\n" +
			"  Then: cd DIR && go mod tidy && make && wasmhist conformance NAME.wasm",
	})
	withSQL := fs.Bool("sql", false, "write a plugin that keeps history in a database (the sql capability)")
	dir := fs.String("dir", "", "write the module into `DIR`, which must not exist (default ./NAME)")
	module := fs.String("module", "", "the module `PATH` (default example.com/NAME)")
	clone := fs.String("wasmhist", "", "the wasmhist clone `PATH` to build against (default: the one around .)")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 || pos[0] != "plugin" {
		return usagef(cmd, "want 'plugin NAME', got %q: use 'wasmhist new plugin NAME'", strings.Join(pos, " "))
	}
	name := pos[1]
	if !pluginName().MatchString(name) {
		return usagef(cmd, "plugin name %q: use 1-64 lower-case letters, digits, - and _, starting with a letter or digit", name)
	}
	if *dir == "" {
		*dir = name
	}
	if *module == "" {
		*module = "example.com/" + name
	}
	root, err := wasmhistRoot(cmd, *clone)
	if err != nil {
		return err
	}
	goVersion, err := goDirective(filepath.Join(root, "go.mod"))
	if err != nil {
		return failf(cmd, "reading %s: %w: check that --wasmhist is a clone of wasmhist", filepath.Join(root, "go.mod"), err)
	}
	render := pluginFiles
	if *withSQL {
		render = sqlPluginFiles
	}
	files, err := render(newPlugin{Name: name, Module: *module, Wasmhist: root, Go: goVersion})
	if err != nil {
		return failf(cmd, "generating the plugin: %w", err)
	}
	// Mkdir, not MkdirAll, for the last element: never write into a
	// directory someone already has.
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(*dir)), 0o755); err != nil {
		return failf(cmd, "creating %s: %w", *dir, err)
	}
	if err := os.Mkdir(*dir, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return failf(cmd, "%s already exists: %w: pass --dir with a new directory", *dir, err)
		}
		return failf(cmd, "creating %s: %w", *dir, err)
	}
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(*dir, f.name)), 0o755); err != nil {
			return failf(cmd, "creating %s: %w", filepath.Dir(filepath.Join(*dir, f.name)), err)
		}
		if err := os.WriteFile(filepath.Join(*dir, f.name), f.data, 0o644); err != nil {
			return failf(cmd, "writing %s: %w", filepath.Join(*dir, f.name), err)
		}
	}
	fmt.Fprintf(e.stdout, "created plugin %s in %s (module %s, building against %s)\n", name, *dir, *module, root)
	fmt.Fprintf(e.stdout, "next: cd %s && go mod tidy && make && wasmhist conformance %s.wasm\n", *dir, name)
	return nil
}

// wasmhistRoot returns the absolute directory of the wasmhist module to
// build against: clone if given, else the module enclosing the working
// directory if that is wasmhist. The command cannot know the clone it was
// built from, so there is no other default.
func wasmhistRoot(cmd, clone string) (string, error) {
	if clone != "" {
		abs, err := filepath.Abs(clone)
		if err != nil {
			return "", failf(cmd, "--wasmhist %s: %w", clone, err)
		}
		if mod, err := modulePath(filepath.Join(abs, "go.mod")); err != nil || mod != wasmhistModule {
			return "", usagef(cmd, "--wasmhist %s is not a clone of wasmhist (its go.mod must declare module %s): pass the clone's top directory", clone, wasmhistModule)
		}
		return abs, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", failf(cmd, "finding the wasmhist clone: %w: pass --wasmhist PATH", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		if mod, err := modulePath(filepath.Join(d, "go.mod")); err == nil {
			if mod == wasmhistModule {
				return d, nil
			}
			break // the enclosing module is another one
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", usagef(cmd, "the current directory is not inside a wasmhist clone: pass --wasmhist PATH, the clone to build the plugin against")
}

// modulePath reads the module path a go.mod declares.
func modulePath(gomod string) (string, error) {
	return goModLine(gomod, "module")
}

// goDirective reads the go version a go.mod declares.
func goDirective(gomod string) (string, error) {
	return goModLine(gomod, "go")
}

func goModLine(gomod, directive string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), directive+" "); ok {
			return strings.Trim(strings.TrimSpace(v), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("no %s directive", directive)
}

// newPlugin is what the templates of a new plugin are filled with.
type newPlugin struct {
	Name, Module, Wasmhist, Go string
}

type newFile struct {
	name string
	data []byte
}

// pluginFiles renders the new module's files; Go sources are formatted,
// which also proves they parse.
func pluginFiles(p newPlugin) ([]newFile, error) {
	var files []newFile
	for _, name := range []string{"main.go", "conformance_test.go"} {
		data, err := quickstartSource(p, name)
		if err != nil {
			return nil, err
		}
		files = append(files, newFile{name, data})
	}
	for _, t := range []struct{ name, text string }{
		{"go.mod", newGoMod},
		{"Makefile", newMakefile},
	} {
		var b bytes.Buffer
		if err := template.Must(template.New(t.name).Parse(t.text)).Execute(&b, p); err != nil {
			return nil, err
		}
		data := b.Bytes()
		if strings.HasSuffix(t.name, ".go") {
			var err error
			if data, err = format.Source(data); err != nil {
				return nil, fmt.Errorf("%s: %w", t.name, err)
			}
		}
		files = append(files, newFile{t.name, data})
	}
	return files, nil
}

// quickstartName is the plugin name the quickstart's sources use.
const quickstartName = "recent"

// quickstartSource is the quickstart plugin's file name, read from the
// clone the new module builds against, under the new plugin's name: what
// the quickstart explains is exactly what new writes, with no second copy
// to keep equal.
func quickstartSource(p newPlugin, name string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(p.Wasmhist, "examples", "quickstart", "plugin", name))
	if err != nil {
		return nil, fmt.Errorf("reading the quickstart's %s from the wasmhist clone: %w", name, err)
	}
	src := strings.ReplaceAll(string(b), "// Command "+quickstartName+" ", "// Command "+p.Name+" ")
	src = strings.ReplaceAll(src, strconv.Quote(quickstartName), strconv.Quote(p.Name))
	return format.Source([]byte(src))
}

// The replace takes the clone for every version of wasmhist; go mod tidy
// then requires it at v0.0.0-00010101000000-000000000000 without asking
// the module proxy, which has never heard of it.
const newGoMod = `module {{.Module}}

go {{.Go}}

replace github.com/wasmhist/wasmhist => {{printf "%q" .Wasmhist}}
`

const newMakefile = `# {{.Name}}.wasm is the plugin: the standard Go toolchain, no TinyGo.
GO ?= go

{{.Name}}.wasm: go.mod $(wildcard *.go)
	GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -o $@ .

.PHONY: test
test:
	$(GO) test ./...
`
