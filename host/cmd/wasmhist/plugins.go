package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/internal/loader"
)

// builtinPlugins are the sample plugins --plugin accepts by name.
var builtinPlugins = []string{"inmemory", "sqlite"}

// pluginDirEnv names a directory searched first for built-in plugins.
const pluginDirEnv = "WASMHIST_PLUGIN_DIR"

// errPluginNotFound is wrapped by resolvePlugin's error for a built-in
// plugin that has not been built.
var errPluginNotFound = errors.New("plugin not built")

// resolvePlugin turns a --plugin value into a .wasm path: a built-in name
// is looked up where `make plugins` and a release layout put it; anything
// else must be a path to an existing file.
func resolvePlugin(e *env, cmd, spec string) (string, error) {
	if spec == "" {
		return "", usagef(cmd, "no plugin given: pass --plugin inmemory, --plugin sqlite or --plugin PATH.wasm")
	}
	if !slices.Contains(builtinPlugins, spec) {
		if !strings.HasSuffix(spec, ".wasm") && !strings.ContainsRune(spec, filepath.Separator) && !strings.Contains(spec, "/") {
			return "", usagef(cmd, "unknown plugin %q: use %s or a path to a .wasm file", spec, strings.Join(builtinPlugins, ", "))
		}
		fi, err := os.Stat(spec)
		if err != nil {
			return "", failf(cmd, "plugin file %s: %w: check the path", spec, err)
		}
		if fi.IsDir() {
			return "", failf(cmd, "plugin file %s is a directory: pass the .wasm file inside it", spec)
		}
		if err := checkWasmFile(cmd, spec, fi.Size()); err != nil {
			return "", err
		}
		return spec, nil
	}
	candidates := pluginCandidates(e, spec)
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", failf(cmd, "built-in plugin %q: %w (looked in %s): run `make install` (or `make plugins`) in the wasmhist repository, set %s, or pass --plugin PATH.wasm",
		spec, errPluginNotFound, strings.Join(candidates, ", "), pluginDirEnv)
}

// maxPluginBytes bounds a plugin file: the sample plugins are 3 to 12 MB,
// and reading a file is the first thing a load does.
const maxPluginBytes = 256 << 20

// wasmHeader starts every WebAssembly binary module: the magic "\0asm" and
// version 1.
var wasmHeader = []byte{0, 'a', 's', 'm', 1, 0, 0, 0}

// checkWasmFile looks at a plugin file's size and first eight bytes before
// anything reads it whole, so that a wrong file (a text file, a 2 GiB
// log) is refused at once with what it is.
func checkWasmFile(cmd, path string, size int64) error {
	if size > maxPluginBytes {
		return failf(cmd, "plugin file %s is %s, larger than any plugin (at most %s): check the path", path, byteSize(size), byteSize(maxPluginBytes))
	}
	f, err := os.Open(path)
	if err != nil {
		return failf(cmd, "plugin file %s: %w: check the path and its permissions", path, err)
	}
	defer f.Close()
	head := make([]byte, len(wasmHeader))
	n, _ := io.ReadFull(f, head)
	switch {
	case n >= 4 && string(head[:4]) == "\x00asm" && !bytes.Equal(head[:n], wasmHeader):
		return failf(cmd, "plugin file %s is a WebAssembly module of an unsupported binary version: build it for WebAssembly 1.0 (the MVP binary format)", path)
	case !bytes.Equal(head[:n], wasmHeader) || n < len(wasmHeader):
		return failf(cmd, "plugin file %s is not a WebAssembly module (it does not start with \\0asm): pass the .wasm file a plugin build wrote, e.g. GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o plugin.wasm", path)
	}
	return nil
}

// pluginOfSession returns the --plugin value for a session whose slot the
// named plugin wrote: a built-in name resolves by itself, any other plugin
// must be named by path.
func pluginOfSession(cmd, sessionPath, name string) (string, error) {
	if slices.Contains(builtinPlugins, name) {
		return name, nil
	}
	return "", usagef(cmd, "session %s was written by plugin %q, which is not built in: pass --plugin with the path of its .wasm file", sessionPath, name)
}

// pluginCandidates lists where a built-in plugin may be, in search order:
// $WASMHIST_PLUGIN_DIR, the user's data directory (where `make install`
// puts them beside a command installed with go install), beside the
// executable (a release layout), and the source tree's
// plugins/<name>/<name>.wasm from the current directory and from the
// enclosing module root (where `make plugins` writes them).
func pluginCandidates(e *env, name string) []string {
	var out []string
	add := func(p string) {
		if p != "" && !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	file := name + ".wasm"
	if dir := e.getenv(pluginDirEnv); dir != "" {
		add(filepath.Join(dir, file))
		add(filepath.Join(dir, name, file))
	}
	if dir := dataDir(e); dir != "" {
		add(filepath.Join(dir, "plugins", file))
	}
	if exe, err := os.Executable(); err == nil {
		if exe, err := filepath.EvalSymlinks(exe); err == nil {
			add(filepath.Join(filepath.Dir(exe), "plugins", file))
			add(filepath.Join(filepath.Dir(exe), "plugins", name, file))
		}
	}
	if wd, err := os.Getwd(); err == nil {
		add(filepath.Join(wd, "plugins", name, file))
		if root := moduleRoot(wd); root != "" {
			add(filepath.Join(root, "plugins", name, file))
		}
	}
	return out
}

// dataDir is where an installed command keeps its files:
// $XDG_DATA_HOME/wasmhist, else ~/.local/share/wasmhist; "" when neither
// is known.
func dataDir(e *env) string {
	if d := e.getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "wasmhist")
	}
	if home := e.getenv("HOME"); home != "" {
		return filepath.Join(home, ".local", "share", "wasmhist")
	}
	return ""
}

// moduleRoot returns the nearest directory at or above dir that holds a
// go.mod, or "".
func moduleRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// newHost returns a host with default limits. Its log is discarded: every
// failure reaches the user as the command's one-line error instead.
func newHost(ctx context.Context, e *env, cmd string, ps *pluginSettings) (*host.Host, error) {
	l, err := ps.limits(cmd)
	if err != nil {
		return nil, err
	}
	dir, err := hostCacheDir(e, cmd)
	if err != nil {
		return nil, err
	}
	// Best effort: a cache that cannot be pruned still works.
	pruneCache(dir, maxCacheBytes)
	h, err := host.New(ctx, host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: l, CacheDir: dir})
	switch {
	case err != nil && interrupted(ctx, err):
		return nil, failf(cmd, "%w while the host started", errInterrupted)
	case err != nil:
		return nil, failf(cmd, "starting the host: %w", err)
	}
	return h, nil
}

// loadPlugin loads the plugin at path with the given grants and turns load
// errors into advice.
func loadPlugin(ctx context.Context, e *env, h *host.Host, cmd, path string, grants []host.Grant, ps *pluginSettings) (*host.Plugin, error) {
	stop := compileNote(e, cmd, path)
	p, err := h.Load(ctx, host.File(path), host.LoadOptions{Grants: grants, Config: ps.config.raw})
	stop(err == nil)
	if interrupted(ctx, err) {
		return nil, failf(cmd, "%w while plugin %s was loaded", errInterrupted, path)
	}
	if err != nil {
		return nil, loadFailure(cmd, path, err, ps)
	}
	return p, nil
}

// loadFailure is the command's error for a plugin at path that did not
// load: the host's error without the prefixes that name the plugin again
// ("host: load X", "host: plugin X"), and the advice for its cause when
// the host's message has none of its own. err stays inspectable.
func loadFailure(cmd, path string, err error, ps *pluginSettings) error {
	text := err.Error()
	if inner := errors.Unwrap(err); inner != nil && strings.HasPrefix(text, "host: load ") {
		text = inner.Error()
	}
	if pe := (*host.PluginError)(nil); errors.As(err, &pe) {
		text = strings.Replace(text, "host: plugin "+pe.Plugin+": ", "", 1)
	}
	msg := fmt.Sprintf("wasmhist %s: loading plugin %s: %s", cmd, path, text)
	l, _ := ps.limits(cmd)
	if a := loadAdvice(err, l); a != "" {
		msg += ": " + a
	}
	return &quietError{msg: msg, err: err}
}

// loadAdvice says what to do about a load error.
func loadAdvice(err error, l host.Limits) string {
	if a := limitAdvice(err, l); a != "" {
		return a
	}
	switch {
	case errors.Is(err, host.ErrInvalidConfig):
		return "fix --config to match the plugin's config_schema ('wasmhist inspect' shows it)"
	case errors.Is(err, os.ErrNotExist):
		return "check the path"
	case errors.Is(err, host.ErrVersionMismatch):
		return "" // the host's message says which side to change
	case errors.Is(err, host.ErrCapabilityDenied):
		return "this command grants only the sql capability; the plugin needs one it cannot have"
	case errors.Is(err, host.ErrMissingExport):
		return "a wasmhist plugin exports wasmhist_abi_v1, describe, provide and store (abi/SPEC.md, sections 3 and 4); a Go plugin gets them by importing the sdk and calling its Register"
	case errors.Is(err, host.ErrInvalidPlugin):
		return "the message says what the host refused; abi/SPEC.md says what a plugin may import (section 2) and answer (section 4)"
	case errors.Is(err, loader.ErrCommand):
		return "" // the host's message says how to build it
	case errors.Is(err, host.ErrTrap):
		return "the plugin failed while describing itself; fix the plugin"
	case errors.As(err, new(*abi.Error)):
		return "" // the plugin's describe failed, and its message says why
	default:
		return "check that it is a wasmhist plugin of ABI v" + abi.Version + " (abi/SPEC.md)"
	}
}

// wantsSQL reports whether a loaded plugin asked for the sql capability.
func wantsSQL(p *host.Plugin) bool {
	return slices.Contains(p.Info().Capabilities, abi.CapabilitySQL)
}

// shortSum is the sha256 prefix printed next to a plugin name.
func shortSum(sum string) string {
	if len(sum) > 12 {
		return sum[:12]
	}
	return sum
}

// describePlugin is "name version (sha256 abcdef012345)".
func describePlugin(p *host.Plugin) string {
	return fmt.Sprintf("%s %s (sha256 %s)", p.Info().Name, p.Info().Version, shortSum(p.SHA256()))
}

// loadingMemoryLimit bounds the heap while a command loads its plugin and
// session with the collector off. A warm load grows the heap from nothing
// to about 15 MB (the plugin file, its kept skeleton, the runtime's
// decoding of the module), which at the default GOGC of 100 costs three
// collections before the first turn, one at GOGC=400, and none with the
// collector off; a first use (the interpreter's code of the whole module)
// about 120 MB. Past this limit the runtime collects as it must, so that a
// plugin of any size loads within it (RATIONALE: "Why does the command
// collect less while it loads?").
const loadingMemoryLimit = 256 << 20

// lessGCWhileLoading turns the collector off while a command loads (and,
// for chat -m, through its one turn), with loadingMemoryLimit as the bound
// (or the user's GOMEMLIMIT, if lower), and returns what gives the user's
// settings back.
func lessGCWhileLoading() (restore func()) {
	gcPercent := debug.SetGCPercent(-1)
	limit := debug.SetMemoryLimit(-1) // reads it
	debug.SetMemoryLimit(min(limit, loadingMemoryLimit))
	return func() {
		debug.SetGCPercent(gcPercent)
		debug.SetMemoryLimit(limit)
	}
}
