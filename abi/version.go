package abi

import (
	"fmt"
	"strconv"
	"strings"
)

// The ABI version this package describes. A plugin built against minor M
// works with any host of the same major whose minor is at least M; minor
// versions only add optional exports and optional fields.
const (
	Major = 1
	Minor = 2
)

// Version is the full ABI version as PluginInfo.ABI carries it: Major and
// Minor joined by a dot (a test keeps the three in step; Go constants cannot
// format numbers).
const Version = "1.2"

// MarkerPrefix starts the name of the marker export. The marker's full name
// carries the major version (MarkerExport for this package) so that a host can
// refuse a plugin of another major by reading the export section, before any
// plugin code runs.
const MarkerPrefix = "wasmhist_abi_v"

// MarkerExport is the marker export a v1 plugin must have. It is a
// `() -> i32` function that returns the plugin's ABI minor version.
const MarkerExport = MarkerPrefix + "1"

// Export names. Every export has the WebAssembly signature () -> i32: it reads
// its JSON request from the Extism input, writes its JSON response with
// output_set and returns 0, or sets an Error with error_set and returns 1.
const (
	ExportDescribe     = "describe"      // required
	ExportProvide      = "provide"       // required
	ExportStore        = "store"         // required
	ExportList         = "list"          // optional
	ExportClear        = "clear"         // optional
	ExportMigrateState = "migrate_state" // optional
)

// RequiredExports lists the exports a v1 plugin must have besides the
// marker. Each call returns a new slice, so no caller can change the
// protocol for another.
func RequiredExports() []string { return []string{ExportDescribe, ExportProvide, ExportStore} }

// OptionalExports lists the exports a v1 plugin may have. Each call returns
// a new slice.
func OptionalExports() []string { return []string{ExportList, ExportClear, ExportMigrateState} }

// ParseVersion splits "major.minor" into its numbers.
func ParseVersion(v string) (major, minor int, err error) {
	a, b, ok := strings.Cut(v, ".")
	if !ok {
		return 0, 0, fmt.Errorf("abi: version %q is not major.minor", v)
	}
	major, err1 := strconv.Atoi(a)
	minor, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || major < 0 || minor < 0 {
		return 0, 0, fmt.Errorf("abi: version %q is not major.minor", v)
	}
	return major, minor, nil
}

// MarkerMajor reports the major version an export name marks, if it is a
// marker export at all.
func MarkerMajor(exportName string) (int, bool) {
	rest, ok := strings.CutPrefix(exportName, MarkerPrefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}
