package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// tracerName is the instrumentation scope of the host's spans.
const tracerName = "github.com/wasmhist/wasmhist/host"

// Host loads plugins and runs their calls. It is safe for concurrent use.
//
// A Host owns what it compiles and opens: its compiled plugins, its
// compilation cache (unless Config.Cache is shared), and the resources of
// its capabilities, such as database files. Close releases all of it.
type Host struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer

	cache     *wasmrt.Cache
	ownsCache bool
	engine    *wasmrt.Engine
	backends  *capability.Backends

	mu       sync.Mutex
	plugins  map[*Plugin]struct{}
	closed   bool
	closeErr error
}

// New validates cfg and returns a Host. ctx is not kept.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("host: new: %w", err)
	}
	cfg = cfg.withDefaults()
	if err := cfg.Limits.validate(); err != nil {
		return nil, fmt.Errorf("host: new: %w", err)
	}
	if cfg.Cache != nil && cfg.CacheDir != "" {
		return nil, fmt.Errorf("host: new: %w: both Cache and CacheDir are set", ErrInvalidConfig)
	}
	h := &Host{
		cfg:      cfg,
		log:      cfg.Logger,
		tracer:   cfg.TracerProvider.Tracer(tracerName),
		backends: capability.NewBackends(capability.Kinds()),
		plugins:  map[*Plugin]struct{}{},
	}
	if cfg.Cache != nil {
		h.cache = cfg.Cache.c
	} else {
		c, err := wasmrt.NewCache(wasmrt.CacheDir(cfg.CacheDir))
		if err != nil {
			return nil, fmt.Errorf("host: new: %w", err)
		}
		h.cache, h.ownsCache = c, true
	}
	h.engine = wasmrt.NewEngine(h.cache, h.backends.Funcs())
	return h, nil
}

// Close closes every plugin the host loaded, then frees what the host owns:
// compiled plugins, its compilation cache (not a shared Config.Cache) and
// capability resources such as open database files. Calls in progress
// finish first on their instances, which are then freed. Closing twice
// returns the first result.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return h.closeErr
	}
	ps := make([]*Plugin, 0, len(h.plugins))
	for p := range h.plugins {
		ps = append(ps, p)
	}
	h.closed = true
	h.mu.Unlock()
	var errs []error
	for _, p := range ps {
		errs = append(errs, p.Close(ctx))
	}
	// Plugins first: their calls end their capability sessions, and their
	// modules must be closed before the cache that compiled them.
	errs = append(errs, h.engine.Close(ctx))
	if h.ownsCache {
		errs = append(errs, h.cache.Close(ctx))
	}
	errs = append(errs, h.backends.Close())
	err := errors.Join(errs...)
	h.mu.Lock()
	h.closeErr = err
	h.mu.Unlock()
	return err
}

func (h *Host) track(p *Plugin) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.plugins[p] = struct{}{}
	return nil
}

func (h *Host) untrack(p *Plugin) {
	h.mu.Lock()
	delete(h.plugins, p)
	h.mu.Unlock()
}
