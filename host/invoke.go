package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/bulk"
	"github.com/wasmhist/wasmhist/host/internal/capability"
	"github.com/wasmhist/wasmhist/host/internal/txn"
)

// invoke runs one export call with every limit, a span, log records and a
// capability call, and hands the output to decode. The capability work of
// the call commits only if decode accepts the output (decode runs under
// the call's deadline), and the instance is
// kept only if the whole call succeeded. Errors are *PluginError.
func (p *Plugin) invoke(ctx context.Context, export string, input []byte, decode func(context.Context, []byte) error) (err error) {
	start := time.Now()
	ctx, span := p.host.tracer.Start(ctx, spanName(export), trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			attribute.String("wasmhist.plugin", p.name),
			attribute.String("wasmhist.export", export),
			attribute.Int("wasmhist.bytes_in", len(input)),
		))
	outLen := 0
	defer func() {
		d := time.Since(start)
		// Attributes and log arguments are built only for a span that
		// records and a logger that logs them: with neither (the
		// defaults) they were most of a call's own allocations.
		if span.IsRecording() {
			oc := outcome(err)
			span.SetAttributes(
				attribute.Int("wasmhist.bytes_out", outLen),
				attribute.Float64("wasmhist.duration_ms", float64(d)/float64(time.Millisecond)),
				attribute.String("wasmhist.outcome", oc),
			)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, oc)
			}
		}
		if err != nil {
			p.log.WarnContext(ctx, "plugin call failed", "plugin", p.name, "export", export,
				"bytes_in", len(input), "bytes_out", outLen, "duration", d, "outcome", outcome(err), "error", err)
			err = &PluginError{Plugin: p.name, Export: export, Err: err}
		} else if p.log.Enabled(ctx, slog.LevelDebug) {
			p.log.DebugContext(ctx, "plugin call", "plugin", p.name, "export", export,
				"bytes_in", len(input), "bytes_out", outLen, "duration", d)
		}
		span.End()
	}()

	if len(input) > p.limits.MaxInputBytes {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInputTooLarge, len(input), p.limits.MaxInputBytes)
	}
	// The deadline stands still while a capability waits for something
	// the plugin does not control (another process's database lock). A
	// plugin granted nothing waits for nothing, and keeps the standard
	// context: the pausable one cost a turn of the in-memory plugin 12%
	// (BenchmarkPeerTurn, 10 messages).
	withTimeout := context.WithTimeout
	if len(p.grants) > 0 {
		withTimeout = capability.WithClock
	}
	ctx, cancel := withTimeout(ctx, p.limits.CallTimeout)
	defer cancel()
	r, err := p.backend.acquire(ctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("waiting for an instance: %w", ErrTimeout)
		}
		return err
	}
	call := capability.NewCall(ctx, p.name, p.grants, p.host.backends)
	out, err := r.run(capability.WithCall(ctx, call), export, input)
	if _, native := r.(nativeBackend); native && err == nil {
		// decode may keep slices of out (a state, say): a WebAssembly
		// instance's output is already a copy out of its memory, but a
		// native handler may reuse the buffer it returned.
		out = bulk.Clone(out)
	}
	outLen = len(out)
	if err == nil && len(out) > p.limits.MaxOutputBytes {
		err = fmt.Errorf("%w: %d bytes, limit %d", ErrOutputTooLarge, len(out), p.limits.MaxOutputBytes)
	}
	if err == nil && decode != nil {
		err = decode(ctx, out) // ctx: the call's deadline bounds the host's work on out too
	}
	if endErr := call.End(context.WithoutCancel(ctx), err == nil); endErr != nil && err == nil {
		err = fmt.Errorf("ending capability call: %w", endErr)
	}
	if f := call.Fault(); f != nil && err != nil {
		// The host failed the call (a database stayed busy), whatever the
		// plugin made of it: say so, not what the plugin reported.
		err = f
	}
	r.release(ctx, err == nil)
	return err
}

// spanNames are the span names of the ABI's exports, made once.
var spanNames = func() map[string]string {
	m := map[string]string{}
	for _, e := range []string{abi.ExportDescribe, abi.ExportProvide, abi.ExportStore, abi.ExportClear,
		abi.ExportList, abi.ExportMigrateState} {
		m[e] = "wasmhist.plugin " + e
	}
	return m
}()

func spanName(export string) string {
	if n, ok := spanNames[export]; ok {
		return n
	}
	return "wasmhist.plugin " + export
}

// outcome names how a call ended, for spans and logs.
func outcome(err error) string {
	var ae *abi.Error
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrTimeout):
		return "timeout"
	case errors.Is(err, ErrMemoryLimit):
		return "memory_limit"
	case errors.Is(err, ErrTrap):
		return "trap"
	case errors.Is(err, ErrOutputTooLarge):
		return "output_too_large"
	case errors.Is(err, ErrInputTooLarge):
		return "input_too_large"
	case errors.Is(err, ErrInvalidOutput):
		return "invalid_output"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, txn.ErrBusy):
		return "busy"
	case errors.As(err, &ae):
		return "plugin_error:" + string(ae.Code)
	}
	return "error"
}
