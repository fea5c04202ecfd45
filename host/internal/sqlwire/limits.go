package sqlwire

import (
	"fmt"
	"time"

	"github.com/wasmhist/wasmhist/abi"
)

// Limits bound what one sql request may do. The zero value of a field means
// its default.
type Limits struct {
	// MaxRows bounds the rows all statements of one request return (10000).
	MaxRows int
	// MaxResultBytes bounds the encoded result of one request (4 MiB).
	MaxResultBytes int
	// MaxRequestBytes bounds the request JSON (4 MiB).
	MaxRequestBytes int
	// MaxStatements bounds the statements of one request (256).
	MaxStatements int
	// Timeout bounds the time one request runs (2 s); a statement still
	// running then is stopped (SQLite interrupts it, PostgreSQL cancels
	// it).
	Timeout time.Duration
}

// defaults are the values of the fields a Limits leaves zero.
var defaults = Limits{
	MaxRows:         10_000,
	MaxResultBytes:  4 << 20,
	MaxRequestBytes: 4 << 20,
	MaxStatements:   256,
	Timeout:         2 * time.Second,
}

// WithDefaults returns l with every zero (or negative) field set to its
// default.
func (l Limits) WithDefaults() Limits { return l.Or(defaults) }

// Or returns l with every zero (or negative) field taken from d.
func (l Limits) Or(d Limits) Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxRows, d.MaxRows)
	def(&l.MaxResultBytes, d.MaxResultBytes)
	def(&l.MaxRequestBytes, d.MaxRequestBytes)
	def(&l.MaxStatements, d.MaxStatements)
	if l.Timeout <= 0 {
		l.Timeout = d.Timeout
	}
	return l
}

// CheckRequest fails a request of n bytes over the limit.
func (l Limits) CheckRequest(n int) *abi.Error {
	if n > l.MaxRequestBytes {
		return abi.Errorf(abi.CodeResourceExhausted, "sql request of %d bytes exceeds the limit of %d", n, l.MaxRequestBytes)
	}
	return nil
}

// CheckStatements fails a request of n statements over the limit.
func (l Limits) CheckStatements(n int) *abi.Error {
	if n > l.MaxStatements {
		return abi.Errorf(abi.CodeResourceExhausted, "sql request of %d statements exceeds the limit of %d", n, l.MaxStatements)
	}
	return nil
}

// InStatement returns err naming statement i, as a request of more than
// one statement reports its failure.
func InStatement(err *abi.Error, i int) *abi.Error {
	return &abi.Error{Code: err.Code, Message: fmt.Sprintf("statement %d: %s", i, err.Message)}
}
