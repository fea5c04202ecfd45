package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
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
		return spec, nil
	}
	candidates := pluginCandidates(e, spec)
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", failf(cmd, "built-in plugin %q: %w (looked in %s): run `make plugins` in the wasmhist repository, set %s, or pass --plugin PATH.wasm",
		spec, errPluginNotFound, strings.Join(candidates, ", "), pluginDirEnv)
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
// $WASMHIST_PLUGIN_DIR, beside the executable (an installed layout), and
// the source tree's plugins/<name>/<name>.wasm from the current directory
// and from the enclosing module root (where `make plugins` writes them).
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
func newHost(ctx context.Context, cmd string, ps *pluginSettings) (*host.Host, error) {
	l, err := ps.limits(cmd)
	if err != nil {
		return nil, err
	}
	h, err := host.New(ctx, host.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Limits: l})
	if err != nil {
		return nil, failf(cmd, "starting the host: %w", err)
	}
	return h, nil
}

// loadPlugin loads the plugin at path with the given grants and turns load
// errors into advice.
func loadPlugin(ctx context.Context, h *host.Host, cmd, path string, grants []host.Grant, ps *pluginSettings) (*host.Plugin, error) {
	p, err := h.Load(ctx, host.File(path), host.LoadOptions{Grants: grants, Config: ps.config.raw})
	if err != nil {
		l, _ := ps.limits(cmd)
		return nil, failf(cmd, "loading plugin %s: %w: %s", path, err, loadAdvice(err, l))
	}
	return p, nil
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
		return "rebuild the plugin against this version of sdk, or upgrade wasmhist"
	case errors.Is(err, host.ErrCapabilityDenied):
		return "this command grants only the sql capability; the plugin needs one it cannot have"
	case errors.Is(err, host.ErrMissingExport), errors.Is(err, host.ErrInvalidPlugin):
		return "is it a wasmhist plugin built with GOOS=wasip1 GOARCH=wasm -buildmode=c-shared? run 'wasmhist conformance' on it for details"
	case errors.Is(err, host.ErrTrap):
		return "the plugin failed while describing itself; fix the plugin"
	default:
		return "run 'wasmhist inspect' on it for details"
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
