package host

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
)

// Config configures a Host. The zero value works.
type Config struct {
	// CacheDir is where compiled plugins are cached across processes.
	// Default: os.UserCacheDir()/wasmhist/compile, or os.TempDir()/
	// wasmhist/compile when there is no user cache directory. The host
	// keeps a subdirectory per runtime version, so an upgraded host never
	// loads code compiled by an older one.
	CacheDir string
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
	if cfg.CacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil || base == "" {
			base = os.TempDir()
		}
		cfg.CacheDir = filepath.Join(base, "wasmhist", "compile")
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
