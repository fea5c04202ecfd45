package host

import (
	"fmt"
	"time"
)

// Limits bound what one plugin may use. A zero field takes its value from
// DefaultLimits; fields are validated by New and Load.
type Limits struct {
	// CallTimeout is the deadline of one export call, guest runtime
	// initialisation included. A plugin still running at the deadline is
	// preempted, even inside a loop, and the call fails with ErrTimeout.
	CallTimeout time.Duration
	// MemoryPages caps every linear memory of an instance (the plugin's
	// and the Extism kernel's, which holds inputs and outputs), in 64 KiB
	// pages. A Go plugin needs at least about 43 pages to start.
	MemoryPages uint32
	// MaxInputBytes caps a request; a larger one fails with
	// ErrInputTooLarge before the plugin runs.
	MaxInputBytes int
	// MaxOutputBytes caps a response; a larger one fails with
	// ErrOutputTooLarge before it is decoded.
	MaxOutputBytes int
	// RecycleBytes: an instance whose linear memory has grown past this
	// many bytes is discarded after its call instead of being reused.
	// WebAssembly memory never shrinks, so this is what returns it.
	RecycleBytes uint64
	// MaxIdleInstances is how many idle instances a plugin keeps warm.
	MaxIdleInstances int
	// MaxInstances bounds a plugin's live instances (busy and idle); a
	// call waits for a free one, up to its context's deadline.
	MaxInstances int
}

// Bounds of MemoryPages: the least a Go guest starts with, and the most a
// 32-bit memory can address.
const (
	minMemoryPages = 43
	maxMemoryPages = 65536
)

// DefaultLimits returns the limits used for zero fields: a 5 s deadline,
// 32 MiB per memory, 8 MiB in and out, recycling at 24 MiB, and up to 4
// idle of at most 16 instances per plugin.
func DefaultLimits() Limits {
	return Limits{
		CallTimeout:      5 * time.Second,
		MemoryPages:      512,
		MaxInputBytes:    8 << 20,
		MaxOutputBytes:   8 << 20,
		RecycleBytes:     24 << 20,
		MaxIdleInstances: 4,
		MaxInstances:     16,
	}
}

// withDefaults fills zero fields from base.
func (l Limits) withDefaults(base Limits) Limits {
	if l.CallTimeout == 0 {
		l.CallTimeout = base.CallTimeout
	}
	if l.MemoryPages == 0 {
		l.MemoryPages = base.MemoryPages
	}
	if l.MaxInputBytes == 0 {
		l.MaxInputBytes = base.MaxInputBytes
	}
	if l.MaxOutputBytes == 0 {
		l.MaxOutputBytes = base.MaxOutputBytes
	}
	if l.RecycleBytes == 0 {
		l.RecycleBytes = base.RecycleBytes
	}
	if l.MaxIdleInstances == 0 {
		l.MaxIdleInstances = base.MaxIdleInstances
	}
	if l.MaxInstances == 0 {
		l.MaxInstances = base.MaxInstances
	}
	return l
}

func (l Limits) validate() error {
	switch {
	case l.CallTimeout < 0:
		return fmt.Errorf("%w: Limits.CallTimeout %v is negative", ErrInvalidConfig, l.CallTimeout)
	case l.MemoryPages < minMemoryPages || l.MemoryPages > maxMemoryPages:
		return fmt.Errorf("%w: Limits.MemoryPages %d is outside [%d, %d]", ErrInvalidConfig, l.MemoryPages, minMemoryPages, maxMemoryPages)
	case l.MaxInputBytes < 0:
		return fmt.Errorf("%w: Limits.MaxInputBytes %d is negative", ErrInvalidConfig, l.MaxInputBytes)
	case l.MaxOutputBytes < 0:
		return fmt.Errorf("%w: Limits.MaxOutputBytes %d is negative", ErrInvalidConfig, l.MaxOutputBytes)
	case l.MaxIdleInstances < 0:
		return fmt.Errorf("%w: Limits.MaxIdleInstances %d is negative", ErrInvalidConfig, l.MaxIdleInstances)
	case l.MaxInstances < 0:
		return fmt.Errorf("%w: Limits.MaxInstances %d is negative", ErrInvalidConfig, l.MaxInstances)
	}
	return nil
}
