package loader

import (
	"crypto/sha256"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/wasmbin"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

func TestReadSectionsOfBuiltPlugins(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		exports []string
		err     error
	}{
		{"valid", "misbehave", []string{"describe", "provide", "store"}, nil},
		{"wrong major", "wrongmajor", nil, hosterr.ErrVersionMismatch},
		{"missing export", "noexport", nil, hosterr.ErrMissingExport},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := os.ReadFile(sdktest.BuildPlugin(t, "../../testdata/hostile/"+tt.dir))
			require.NoError(t, err)
			s, err := ReadSections(b)
			require.NoError(t, err)
			assert.Contains(t, s.Imports, Import{Module: moduleKernel, Name: "output_set", Kind: "func"})
			st, err := CheckSections(tt.dir, s, nil)
			if tt.err != nil {
				require.ErrorIs(t, err, tt.err)
				assert.ErrorContains(t, err, tt.dir, "the error names the plugin")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.exports, st.Exports)
		})
	}
}

// module builds a minimal WebAssembly binary with the given sections.
func module(sections ...[]byte) []byte {
	b := slices.Clone(wasmbin.Header)
	for _, s := range sections {
		b = append(b, s...)
	}
	return b
}

func section(id byte, body ...byte) []byte {
	return append([]byte{id, byte(len(body))}, body...)
}

func str(s string) []byte { return append([]byte{byte(len(s))}, s...) }

func TestCheckSectionsImports(t *testing.T) {
	exports := []byte{4}
	for _, e := range []string{abi.MarkerExport, "describe", "provide", "store"} {
		exports = append(exports, str(e)...)
		exports = append(exports, 0, 0)
	}
	imp := func(mod, name string) []byte {
		b := []byte{1}
		b = append(b, str(mod)...)
		b = append(b, str(name)...)
		return append(b, 0, 0)
	}
	// memory imports "env"."memory" with limits {min 1}: kind 2, flags 0, min 1.
	memory := append(append(append([]byte{1}, str(moduleKernel)...), str("memory")...), 2, 0, 1)
	tests := []struct {
		name string
		imp  []byte
		err  error
		says string
	}{
		{"kernel", imp(moduleKernel, "alloc"), nil, ""},
		{"kernel function a plugin should not call", imp(moduleKernel, "reset"), nil, ""},
		{"known capability", imp(abi.CapabilityModule, "sql_query"), nil, ""},
		{"unknown capability", imp(abi.CapabilityModule, "launch"), hosterr.ErrInvalidPlugin, "does not provide"},
		{"foreign module", imp("env", "getpid"), hosterr.ErrInvalidPlugin, "plugins may import only"},
		{"unknown kernel function", imp(moduleKernel, "spawn"), hosterr.ErrInvalidPlugin, "not one of the Extism kernel functions"},
		{"a memory, not a function", memory, hosterr.ErrInvalidPlugin, "imports only functions"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := module(section(wasmbin.SectionImport, tt.imp...), section(wasmbin.SectionExport, exports...))
			s, err := ReadSections(b)
			require.NoError(t, err)
			_, err = CheckSections("p", s, []string{"sql_query"})
			if tt.err == nil {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, tt.err)
				assert.ErrorContains(t, err, tt.says)
			}
		})
	}
}

func TestReadSectionsMalformed(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"not wasm", []byte("\x7fELF....")},
		{"section overruns", module([]byte{wasmbin.SectionExport, 10, 1})},
		{"name overruns", module(section(wasmbin.SectionExport, 1, 9, 'a'))},
		{"leb too long", module([]byte{wasmbin.SectionExport, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSections(tt.b)
			require.Error(t, err)
		})
	}
}

func FuzzReadSections(f *testing.F) {
	f.Add(module(section(wasmbin.SectionExport, 1, 1, 'a', 0, 0)))
	f.Add(module(section(wasmbin.SectionImport, 1, 1, 'm', 1, 'n', 2, 1, 1, 2)))
	f.Add(module([]byte{wasmbin.SectionExport, 0xff, 0xff, 0xff, 0xff, 0x0f}))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ReadSections(b)
		if err == nil {
			CheckSections("fuzz", s, nil)
		}
	})
}

func TestCheckPin(t *testing.T) {
	got := sha256.Sum256([]byte("module bytes"))
	const sum = "2f0b0b3e2c1bb9f5a6b3e0e7d0c64cd1b2f3d5f0f0a1f4c2c0b7e2c7f2c1d0e9"
	err := CheckPin(got, sum)
	require.ErrorIs(t, err, hosterr.ErrChecksumMismatch)
	require.NoError(t, CheckPin(got, ""))
	uerr := CheckPin(got, strings.ToUpper(hexOf(got)))
	require.NoError(t, uerr, "upper-case pin refused")
	assert.ErrorContains(t, err, "expected "+sum)
	assert.ErrorContains(t, err, "got "+hexOf(got))
}

func hexOf(b [32]byte) string {
	const digits = "0123456789abcdef"
	var s []byte
	for _, c := range b {
		s = append(s, digits[c>>4], digits[c&15])
	}
	return string(s)
}

func TestCheckInfo(t *testing.T) {
	ok := func() abi.PluginInfo {
		return abi.PluginInfo{Name: "p", Version: "1", ABI: "1.0", StateVersion: 1, StateSchema: json.RawMessage(`{}`)}
	}
	sql := []abi.Capability{abi.CapabilitySQL}
	tests := []struct {
		name      string
		edit      func(*abi.PluginInfo)
		granted   []abi.Capability
		err       error
		mentioned string
	}{
		{"valid", func(*abi.PluginInfo) {}, nil, nil, ""},
		{"bad name", func(i *abi.PluginInfo) { i.Name = "Bad Name" }, nil, hosterr.ErrInvalidPlugin, "name"},
		{"future minor", func(i *abi.PluginInfo) { i.ABI = "1.99" }, nil, hosterr.ErrVersionMismatch, "upgrade the host"},
		{"old major", func(i *abi.PluginInfo) { i.ABI = "0.3" }, nil, hosterr.ErrVersionMismatch, "rebuild the plugin"},
		{"garbage abi", func(i *abi.PluginInfo) { i.ABI = "one" }, nil, hosterr.ErrVersionMismatch, "one"},
		{"no state schema", func(i *abi.PluginInfo) { i.StateSchema = nil }, nil, hosterr.ErrInvalidPlugin, "state_schema"},
		{"bad omit_state", func(i *abi.PluginInfo) { i.OmitState = []string{"describe"} }, nil, hosterr.ErrInvalidPlugin, "omit_state"},
		{"current minor", func(i *abi.PluginInfo) { i.ABI = abi.Version }, nil, nil, ""},
		{"omit list at 1.1", func(i *abi.PluginInfo) { i.ABI, i.OmitState = "1.1", []string{"provide", "list"} }, nil, nil, ""},
		{"omit list at 1.0", func(i *abi.PluginInfo) { i.OmitState = []string{"list"} }, nil, hosterr.ErrInvalidPlugin, "ABI 1.1"},
		{"capability not granted", func(i *abi.PluginInfo) { i.Capabilities = sql }, nil, hosterr.ErrCapabilityDenied, "not granted"},
		{"capability granted", func(i *abi.PluginInfo) { i.Capabilities = sql }, sql, nil, ""},
		{"capability unknown", func(i *abi.PluginInfo) { i.Capabilities = []abi.Capability{"net"} }, []abi.Capability{"net"}, hosterr.ErrCapabilityDenied, "does not provide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			info := ok()
			tt.edit(&info)
			err := CheckInfo("p.wasm", &info, tt.granted, sql)
			if tt.err == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.err)
			assert.ErrorContains(t, err, tt.mentioned)
		})
	}
}

// TestValidName: validName accepts what ^[a-z0-9][a-z0-9_-]{0,63}$ does.
func TestValidName(t *testing.T) {
	re := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	for _, name := range []string{
		"", "a", "0", "-", "_", "-a", "_a", "a-", "a_", "in-memory", "sqlite_2", "A", "aB", "a b", "a.b", "é",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "a\x00", "a\n",
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, re.MatchString(name), validName(name))
		})
	}
}
