//go:build !wasip1

package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// leanForbidden matches the functions through which a plugin links
// encoding/json's reflective codec or fmt's formatting: either adds about
// 0.7 to 1.5 MB to the module, and the host validates the whole module on
// every load, so the plugin's load time grows with it. A reachable
// reflect.Value.Method keeps every exported method of every type.
var leanForbidden = regexp.MustCompile(`^(fmt\.[A-Za-z(]` +
	`|encoding/json\.(Marshal|Unmarshal|MarshalIndent|NewEncoder|NewDecoder|Valid|Compact|Indent|checkValid|\(\*encodeState\)\.marshal|\(\*decodeState\)\.unmarshal)$` +
	`|reflect\.Value\.Method(ByName)?$)`)

// dataSymbol matches linker symbols that are data deduplicated by content
// (argument maps, stack objects, string temporaries); -dumpdep attributes
// them to whichever package's copy was kept, so they say nothing about what
// code is linked.
var dataSymbol = regexp.MustCompile(`\.(arginfo\d+|argliveinfo|stkobj|opendefer|stmp_\d+|inittask)$`)

// TestPluginLinksNeitherFmtNorJSON builds the plugin as the host loads it
// and fails when a path the linker keeps reaches encoding/json's codec or
// fmt: one reachable call links the package wholesale.
func TestPluginLinksNeitherFmtNorJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "inmemory.wasm")
	cmd := exec.Command(sdktest.GoCommand(), "build", "-buildmode=c-shared", "-ldflags=-dumpdep", "-o", out, ".")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var deps, stderr bytes.Buffer
	cmd.Stdout = &stderr
	cmd.Stderr = &deps // the linker writes its dependency graph to stderr
	require.NoError(t, cmd.Run(), "build:\n%s%s", stderr.String(), tail(deps.String()))
	edges := 0
	bad := map[string]string{}
	for sc := bufio.NewScanner(&deps); sc.Scan(); {
		from, to, ok := strings.Cut(sc.Text(), " -> ")
		if !ok {
			continue
		}
		edges++
		to, _, _ = strings.Cut(to, " ") // drop annotations such as <UsedInIface>
		if !dataSymbol.MatchString(to) && leanForbidden.MatchString(to) {
			if _, seen := bad[to]; !seen {
				bad[to] = from
			}
		}
	}
	require.NotZero(t, edges, "the linker printed no dependency graph:\n%s", tail(deps.String()))
	for to, from := range bad {
		assert.Failf(t, "the plugin links "+to, "reached from %s", from)
	}
}

func tail(s string) string { return s[max(0, len(s)-2000):] }
