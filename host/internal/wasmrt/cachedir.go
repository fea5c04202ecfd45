package wasmrt

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
)

// Versions the compiled code depends on, used when the binary carries no
// module information (for example a stripped build). They match go.mod.
const (
	fallbackWazeroVersion = "v1.9.0"
	fallbackExtismVersion = "v1.7.1"
)

// CacheKey names the subdirectory of the compilation cache for this
// binary. Compiled machine code is only valid for the compiler that wrote
// it, so the key carries the wazero version and the target (and the go-sdk
// version, from when go-sdk's kernel module was compiled into the same
// cache; kept so that existing caches stay valid).
// An upgrade then starts an empty directory instead of loading stale code.
func CacheKey() string {
	wz, ex := fallbackWazeroVersion, fallbackExtismVersion
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version + "-replaced"
			}
			switch d.Path {
			case "github.com/tetratelabs/wazero":
				wz = v
			case "github.com/extism/go-sdk":
				ex = v
			}
		}
	}
	key := "wazero-" + wz + "_extism-" + ex + "_" + runtime.GOOS + "-" + runtime.GOARCH
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == ':' {
			return '_'
		}
		return r
	}, key)
}

// CacheDir returns the keyed compilation cache directory under base.
func CacheDir(base string) string { return filepath.Join(base, CacheKey()) }
