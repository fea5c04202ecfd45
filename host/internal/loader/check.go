package loader

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
)

// Modules a plugin may import functions from.
const (
	moduleKernel = "extism:host/env"
	moduleWASI   = "wasi_snapshot_preview1"
)

// CheckPin refuses, when pin is not empty, bytes whose sha256, sum,
// differs from it.
func CheckPin(sum [32]byte, pin string) error {
	if pin == "" {
		return nil
	}
	got := hex.EncodeToString(sum[:])
	if want := strings.ToLower(strings.TrimSpace(pin)); want != got {
		return fmt.Errorf("%w: expected %s, got %s", hosterr.ErrChecksumMismatch, want, got)
	}
	return nil
}

// ErrCommand is the cause added to a failed describe of a module built as
// a WASI command (Static.Command), with what to do about it.
var ErrCommand = errors.New("it is built as a WASI command (it exports _start, not _initialize), whose exports cannot run: build a Go plugin with -buildmode=c-shared")

// Static is what the export section says about a plugin.
type Static struct {
	// Exports are the ABI exports present, required and optional.
	Exports []string
	// Command: the module exports _start and no _initialize, as a WASI
	// command does (for Go, a build without -buildmode=c-shared, whose
	// exports trap until a _start that never runs has started the
	// runtime).
	Command bool
}

// CheckSections checks a module's exports and imports against ABI v1 and
// the host functions the host provides (capFuncs: import names in
// abi.CapabilityModule). plugin names the module in errors.
func CheckSections(plugin string, s *Sections, capFuncs []string) (*Static, error) {
	majors := []int{}
	for _, e := range s.Exports {
		if m, ok := abi.MarkerMajor(e); ok {
			majors = append(majors, m)
		}
	}
	switch {
	case len(majors) == 0:
		return nil, fmt.Errorf("%w: %s has no %s export: it is not a wasmhist plugin (a Go plugin gets the export by importing the sdk)", hosterr.ErrMissingExport, plugin, abi.MarkerExport)
	case !slices.Contains(majors, abi.Major):
		return nil, VersionError(plugin, fmt.Sprintf("%d", majors[0]))
	}
	var missing []string
	for _, e := range abi.RequiredExports() {
		if !slices.Contains(s.Exports, e) {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s lacks required export(s) %s of ABI v%d", hosterr.ErrMissingExport, plugin, strings.Join(missing, ", "), abi.Major)
	}
	st := &Static{Exports: abi.RequiredExports(),
		Command: slices.Contains(s.Exports, "_start") && !slices.Contains(s.Exports, "_initialize")}
	for _, e := range abi.OptionalExports() {
		if slices.Contains(s.Exports, e) {
			st.Exports = append(st.Exports, e)
		}
	}
	for _, im := range s.Imports {
		if im.Kind != "func" {
			return nil, fmt.Errorf("%w: %s imports %s %s.%s; a plugin imports only functions (abi/SPEC.md section 2)", hosterr.ErrInvalidPlugin, plugin, im.Kind, im.Module, im.Name)
		}
		switch im.Module {
		case moduleKernel:
			if !slices.Contains(kernelImports, im.Name) {
				return nil, fmt.Errorf("%w: %s imports %s.%s, which is not one of the Extism kernel functions a plugin may use (abi/SPEC.md section 2.1)", hosterr.ErrInvalidPlugin, plugin, im.Module, im.Name)
			}
		case moduleWASI:
		case abi.CapabilityModule:
			if !slices.Contains(capFuncs, im.Name) {
				return nil, fmt.Errorf("%w: %s imports host function %s.%s, which this host does not provide", hosterr.ErrInvalidPlugin, plugin, im.Module, im.Name)
			}
		default:
			return nil, fmt.Errorf("%w: %s imports %s.%s; plugins may import only %s, %s and %s", hosterr.ErrInvalidPlugin, plugin, im.Module, im.Name, moduleKernel, moduleWASI, abi.CapabilityModule)
		}
	}
	return st, nil
}

// kernelImports are the extism:host/env functions a plugin may import
// (abi/SPEC.md section 2.1): the ones it uses, and those of the Extism
// kernel the host serves but a plugin should not call, which an Extism
// plugin kit may still import.
var kernelImports = []string{
	"input_length", "input_load_u64", "input_load_u8", "alloc", "free", "length", "load_u64", "load_u8",
	"store_u64", "store_u8", "output_set", "error_set",
	"input_offset", "length_unsafe", "config_get", "var_get", "var_set", "http_request", "http_status_code",
	"http_headers", "get_log_level", "log_trace", "log_debug", "log_info", "log_warn", "log_error",
	"input_set", "output_length", "output_offset", "error_get", "memory_bytes", "reset",
}

// VersionError is the error for a plugin built against another ABI version
// (given as "major" or "major.minor"). It says which side to change.
func VersionError(plugin, pluginVersion string) error {
	major, minor, err := abi.ParseVersion(pluginVersion)
	if err != nil {
		if _, err2 := fmt.Sscanf(pluginVersion, "%d", &major); err2 != nil {
			return fmt.Errorf("%w: plugin %s reports ABI version %q, which is not major.minor", hosterr.ErrVersionMismatch, plugin, pluginVersion)
		}
		minor = -1
	}
	fix := fmt.Sprintf("rebuild the plugin against the sdk for ABI v%d (a Go plugin leaves PluginInfo.ABI empty: the sdk fills in its own)", abi.Major)
	if major > abi.Major || (major == abi.Major && minor > abi.Minor) {
		fix = "upgrade the host, or declare an ABI it speaks (a Go plugin leaves PluginInfo.ABI empty: the sdk fills in its own)"
	}
	return fmt.Errorf("%w: plugin %s speaks ABI v%s, this host speaks ABI v%s: %s", hosterr.ErrVersionMismatch, plugin, pluginVersion, abi.Version, fix)
}

// validName reports whether name is 1-64 of a-z, 0-9, '-' and '_',
// starting with a letter or digit (^[a-z0-9][a-z0-9_-]{0,63}$; as a
// regular expression, compiling the bound at package initialisation cost
// every process 743 allocations).
func validName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name[0] == '-' || name[0] == '_' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// CheckInfo validates what describe returned, except the schemas (the
// caller compiles them). granted lists the capabilities granted to this
// load; available those the host can serve at all.
func CheckInfo(plugin string, info *abi.PluginInfo, granted, available []abi.Capability) error {
	if !validName(info.Name) {
		return fmt.Errorf("%w: %s: describe: name %q must be 1-64 of a-z, 0-9, '-', '_', starting with a letter or digit", hosterr.ErrInvalidPlugin, plugin, info.Name)
	}
	major, minor, err := abi.ParseVersion(info.ABI)
	if err != nil || major != abi.Major || minor > abi.Minor {
		return VersionError(info.Name, info.ABI)
	}
	if info.StateVersion < 0 {
		return fmt.Errorf("%w: %s: describe: state_version %d is negative", hosterr.ErrInvalidPlugin, info.Name, info.StateVersion)
	}
	if len(info.StateSchema) == 0 {
		return fmt.Errorf("%w: %s: describe: state_schema is required", hosterr.ErrInvalidPlugin, info.Name)
	}
	for _, e := range info.OmitState {
		switch {
		case e == abi.ExportProvide || e == abi.ExportStore || e == abi.ExportClear:
		case e == abi.ExportList && minor >= 1:
			// ABI 1.1: list answers by reference (SPEC section 4.4.1).
		case e == abi.ExportList:
			return fmt.Errorf("%w: %s: describe: omit_state lists list, which ABI 1.1 added, but the plugin reports ABI %s: report abi \"1.1\" or leave list out",
				hosterr.ErrInvalidPlugin, info.Name, info.ABI)
		default:
			return fmt.Errorf("%w: %s: describe: omit_state may list provide, store, clear and list, not %q", hosterr.ErrInvalidPlugin, info.Name, e)
		}
	}
	for _, c := range info.Capabilities {
		if !slices.Contains(available, c) {
			return fmt.Errorf("%w: plugin %s needs capability %q, which this host does not provide", hosterr.ErrCapabilityDenied, info.Name, c)
		}
		if !slices.Contains(granted, c) {
			return fmt.Errorf("%w: plugin %s needs capability %q, which was not granted: add a grant for it to LoadOptions.Grants", hosterr.ErrCapabilityDenied, info.Name, c)
		}
	}
	return nil
}
