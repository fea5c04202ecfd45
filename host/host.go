package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// tracerName is the instrumentation scope of the host's spans.
const tracerName = "github.com/wasmhist/wasmhist/host"

// Host loads plugins and runs their calls. It is safe for concurrent use.
// Compiled plugins are shared by every Host of the process.
type Host struct {
	cfg      Config
	cacheDir string // keyed by runtime version
	log      *slog.Logger
	tracer   trace.Tracer

	mu      sync.Mutex
	plugins map[*Plugin]struct{}
	closed  bool
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
	return &Host{
		cfg:      cfg,
		cacheDir: wasmrt.CacheDir(cfg.CacheDir),
		log:      cfg.Logger,
		tracer:   cfg.TracerProvider.Tracer(tracerName),
		plugins:  map[*Plugin]struct{}{},
	}, nil
}

// Close closes every plugin the host loaded. Calls in progress finish
// first on their instances, which are then freed.
func (h *Host) Close(ctx context.Context) error {
	h.mu.Lock()
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
	return errors.Join(errs...)
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
