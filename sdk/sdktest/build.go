package sdktest

import (
	"crypto/sha256"
	"encoding/hex"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// BuildPlugin compiles the Go plugin package at dir (a directory path, or an
// import path resolvable from the current module) with the standard toolchain
// for GOOS=wasip1 GOARCH=wasm -buildmode=c-shared and returns the .wasm path.
//
// Output goes to a directory shared by all test processes of the module, so
// that the host's on-disk compilation cache sees the same bytes across
// packages; the go build cache keeps rebuilds to a link step.
func BuildPlugin(tb testing.TB, dir string) string {
	tb.Helper()
	out, err := Build(dir)
	if err != nil {
		tb.Fatalf("sdktest: build plugin %s: %v", dir, err)
	}
	return out
}

// Build is BuildPlugin without a testing.TB, for tools.
func Build(dir string) (string, error) {
	abs := dir
	if !strings.HasPrefix(dir, "./") && !filepath.IsAbs(dir) && !strings.HasPrefix(dir, "../") {
		// An import path: go build resolves it; key the output by its name.
	} else if a, err := filepath.Abs(dir); err == nil {
		abs = a
	}
	// The key includes the module the build resolves in: two checkouts of
	// one module build the same import path from different sources, and
	// must not overwrite each other's output while their tests run.
	sum := sha256.Sum256([]byte(abs + "\x00" + moduleRoot()))
	outDir := filepath.Join(os.TempDir(), "wasmhist-plugins")
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	name := filepath.Base(abs) + "-" + hex.EncodeToString(sum[:6]) + ".wasm"
	final := filepath.Join(outDir, name)
	tmp, err := os.CreateTemp(outDir, name+".*.tmp")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command(GoCommand(), "build", "-buildmode=c-shared", "-o", tmp.Name(), abs)
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if filepath.IsAbs(abs) {
		cmd.Dir = abs
		cmd.Args[len(cmd.Args)-1] = "."
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{dir: dir, out: string(out), err: err}
	}
	// Rename is atomic, so concurrent test processes never see a partial file.
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	return final, nil
}

type buildError struct {
	dir, out string
	err      error
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }
func (e *buildError) Unwrap() error { return e.err }

// GoCommand returns the go command to build with: the one on PATH, else
// the one under $GOROOT, else the toolchain this program was built with.
func GoCommand() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	for _, root := range []string{os.Getenv("GOROOT"), build.Default.GOROOT} {
		if root == "" {
			continue
		}
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

// moduleRoot returns the nearest directory at or above the working
// directory that holds a go.mod, or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
