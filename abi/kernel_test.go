package abi

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goSDK is the module of the reference Extism host. The tests run every
// sample plugin and the kernel comparison under it; no program links it,
// so ExtismKernel is what the version report and the compilation cache
// key name instead.
const goSDK = "github.com/extism/go-sdk"

// TestExtismKernelIsGoModVersion: ExtismKernel names the go-sdk release the
// tests compare the host's kernel with, so an upgrade of go-sdk in go.mod
// fails here until the constant (and the kernel, if it changed) follows.
func TestExtismKernelIsGoModVersion(t *testing.T) {
	gomod, err := os.ReadFile("../go.mod")
	require.NoError(t, err)
	v, ok := requiredVersion(gomod, goSDK)
	require.True(t, ok, "go.mod requires no %s", goSDK)
	assert.Equal(t, v, ExtismKernel, "abi.ExtismKernel differs from the %s in go.mod", goSDK)
}

// TestGoSDKOnlyInTests: no package of the module links go-sdk (nor the
// protobuf and observe-sdk it brings); only tests do. The run with -test is
// the control that the check can see go-sdk at all.
func TestGoSDKOnlyInTests(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		links bool
	}{
		{"programs and libraries", []string{"list", "-deps", "./..."}, false},
		{"with their tests", []string{"list", "-deps", "-test", "./..."}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("go", tt.args...)
			cmd.Dir = ".."
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			assert.Equal(t, tt.links, slices.Contains(strings.Fields(string(out)), goSDK))
		})
	}
}

// requiredVersion is the version go.mod requires of module path, from a
// require block or a one-line require directive.
func requiredVersion(gomod []byte, path string) (string, bool) {
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "require" && f[1] == "(":
			inBlock = true
		case inBlock && len(f) == 1 && f[0] == ")":
			inBlock = false
		case inBlock && len(f) == 2 && f[0] == path:
			return f[1], true
		case len(f) == 3 && f[0] == "require" && f[1] == path:
			return f[2], true
		}
	}
	return "", false
}

func TestRequiredVersion(t *testing.T) {
	tests := []struct {
		name   string
		gomod  string
		want   string
		wantOK bool
	}{
		{"block", "module m\n\nrequire (\n\tx.org/a v1.0.0\n\t" + goSDK + " v1.7.1\n)\n", "v1.7.1", true},
		{"indirect in a block", "require (\n\t" + goSDK + " v1.2.3 // indirect\n)\n", "v1.2.3", true},
		{"one line", "module m\nrequire " + goSDK + " v1.6.0\n", "v1.6.0", true},
		{"a longer path with the same prefix", "require (\n\t" + goSDK + "/extra v9.0.0\n)\n", "", false},
		{"outside a block", "module m\n" + goSDK + " v1.0.0\n", "", false},
		{"absent", "module m\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := requiredVersion([]byte(tt.gomod), goSDK)
			assert.Equal(t, tt.wantOK, ok)
			assert.Equal(t, tt.want, got)
		})
	}
}
