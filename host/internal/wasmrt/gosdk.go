package wasmrt

// The kernel (kernel.go) follows go-sdk v1.7.1's imports and semantics,
// and the compilation cache key and `wasmhist version` name that version,
// which they read from the binary's build information. The host no longer
// calls go-sdk, so it is linked here only to keep that report true; drop
// this import together with the report.
import _ "github.com/extism/go-sdk"
