package wasmrt

import (
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
)

// fallbackWazeroVersion is the wazero the compiled code depends on, used
// when the binary carries no module information (for example a stripped
// build). It matches go.mod.
const fallbackWazeroVersion = "v1.9.0"

// CacheKey names the subdirectory of the compilation cache for this
// binary. Compiled machine code is only valid for the compiler that wrote
// it, so the key carries the wazero version and the target (and the go-sdk
// version, from when go-sdk's kernel module was compiled into the same
// cache; kept so that existing caches stay valid).
// An upgrade then starts an empty directory instead of loading stale code.
func CacheKey() string {
	// The host does not link go-sdk: the kernel it follows is a constant.
	wz, ex := fallbackWazeroVersion, abi.ExtismKernel
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			v := d.Version
			if d.Replace != nil {
				v = d.Replace.Version + "-replaced"
			}
			if d.Path == "github.com/tetratelabs/wazero" {
				wz = v
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
