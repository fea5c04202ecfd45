package sdktest

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// leanForbidden matches the functions through which a plugin links
// encoding/json's reflective codec or fmt's formatting: either adds about
// 0.7 to 1.5 MB to the module, which a first use compiles and every
// loaded build maps. A reachable reflect.Value.Method keeps every
// exported method of every type.
var leanForbidden = regexp.MustCompile(`^(fmt\.[A-Za-z(]` +
	`|encoding/json\.(Marshal|Unmarshal|MarshalIndent|NewEncoder|NewDecoder|Valid|Compact|Indent|checkValid|\(\*encodeState\)\.marshal|\(\*decodeState\)\.unmarshal)$` +
	`|reflect\.Value\.Method(ByName)?$)`)

// dataSymbol matches linker symbols that are data deduplicated by content
// (argument maps, stack objects, string temporaries); -dumpdep attributes
// them to whichever package's copy was kept, so they say nothing about what
// code is linked.
var dataSymbol = regexp.MustCompile(`\.(arginfo\d+|argliveinfo|stkobj|opendefer|stmp_\d+|inittask)$`)

// CheckLean builds the Go plugin package at dir as the host loads it
// (GOOS=wasip1 GOARCH=wasm -buildmode=c-shared) with the linker's
// dependency graph (-ldflags=-dumpdep), and fails tb once, in one line,
// if a path the linker keeps reaches a function of encoding/json's
// reflective codec, of fmt, or reflect.Value.Method: it names each such
// function where a path enters them (the first five) and the function
// that reaches it. One reachable call links such a package wholesale: a
// plugin that links neither is about 1.4 MB smaller, which a first use
// compiles and every loaded build maps. Leanness is optional: a plugin
// that links fmt conforms.
func CheckLean(tb testing.TB, dir string) {
	tb.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		tb.Fatalf("sdktest: lean check of %s: %v", dir, err)
	}
	out := filepath.Join(tb.TempDir(), filepath.Base(abs)+".wasm")
	cmd := exec.Command(GoCommand(), "build", "-buildmode=c-shared", "-ldflags=-dumpdep", "-o", out, ".")
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	var deps, stdout bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &deps // the linker writes its dependency graph to stderr
	if err := cmd.Run(); err != nil {
		tb.Fatalf("sdktest: lean check of %s: build: %v\n%s%s", dir, err, stdout.String(), tail(deps.String()))
	}
	edges := 0
	bad := map[string]string{}
	var order []string
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
				order = append(order, to)
			}
		}
	}
	if edges == 0 {
		tb.Fatalf("sdktest: lean check of %s: the linker printed no dependency graph:\n%s", dir, tail(deps.String()))
	}
	// Name where each path enters the forbidden packages, not every
	// function it then links.
	entries := order[:0:0]
	for _, to := range order {
		from := strings.TrimPrefix(strings.TrimPrefix(bad[to], "type:"), "*")
		if !strings.HasPrefix(from, "fmt.") && !strings.HasPrefix(from, "encoding/json.") {
			entries = append(entries, to)
		}
	}
	if len(entries) == 0 {
		entries = order
	}
	if len(entries) == 0 {
		return
	}
	const shown = 5
	var links []string
	for _, to := range entries[:min(len(entries), shown)] {
		links = append(links, to+" (from "+bad[to]+")")
	}
	more := ""
	if n := len(entries) - shown; n > 0 {
		more = " and " + strconv.Itoa(n) + " more"
	}
	tb.Errorf("sdktest: the plugin %s links %s%s: build errors with errors.New or concatenation and read JSON without encoding/json", dir, strings.Join(links, ", "), more)
}

func tail(s string) string { return s[max(0, len(s)-2000):] }
