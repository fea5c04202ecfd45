package host

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Host. The zero value works.
type Config struct {
	// CacheDir is where compiled plugins are cached across processes.
	// Default: os.UserCacheDir()/wasmhist/compile, or os.TempDir()/
	// wasmhist/compile when there is no user cache directory. The host
	// keeps a subdirectory per runtime version, so an upgraded host never
	// loads code compiled by an older one. Must be empty when Cache is set.
	CacheDir string
	// Cache, when set, is the compilation cache of the Host, shared with
	// the other Hosts given it, so that they compile each plugin once. The
	// caller created it with NewCache and closes it after the Hosts. Nil:
	// the Host opens a cache of its own in CacheDir and closes it in Close.
	Cache *Cache
	// Logger receives a Debug record per load and call and a Warn record
	// per failure. Default: a logger that discards everything, so that an
	// embedded host is silent unless asked.
	Logger *slog.Logger
	// Limits are the defaults of every plugin this host loads;
	// LoadOptions.Limits overrides them per plugin. Zero fields take
	// DefaultLimits.
	Limits Limits
	// TracerProvider makes a span per plugin call. Default:
	// otel.GetTracerProvider(), a no-op unless the program installs one.
	TracerProvider trace.TracerProvider
}

// withDefaults returns cfg with every zero field set.
func (cfg Config) withDefaults() Config {
	if cfg.CacheDir == "" && cfg.Cache == nil {
		cfg.CacheDir = defaultCacheDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cfg.Limits = cfg.Limits.withDefaults(DefaultLimits())
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return cfg
}

// DefaultCacheDir is where a Host caches compiled plugins when
// Config.CacheDir is empty: os.UserCacheDir()/wasmhist/compile, or
// os.TempDir()/wasmhist/compile when there is no user cache directory.
// Compiled code goes in a subdirectory per runtime version (CacheSubdir).
func DefaultCacheDir() string { return defaultCacheDir() }

// CacheSubdir is the subdirectory of a cache directory that this build
// of the host reads and writes: compiled code is valid only for the
// runtime versions that wrote it, so each set of versions has its own.
func CacheSubdir() string { return wasmrt.CacheKey() }

func defaultCacheDir() string {
	base, err := os.UserCacheDir()
	if err != nil || base == "" {
		base = os.TempDir()
	}
	return filepath.Join(base, "wasmhist", "compile")
}
