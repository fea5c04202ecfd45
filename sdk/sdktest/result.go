package sdktest

import (
	"errors"
	"fmt"
)

// Reason is a short code, documented by the case that reports it, saying
// which promise a provider broke. Tools may match on it; its text is stable.
type Reason string

// Reasons more than one case reports. Each case documents, in Case.Reasons,
// the ones it may report.
const (
	// ReasonLoadFailed: the factory could not make a subject.
	ReasonLoadFailed Reason = "load_failed"
	// ReasonCallFailed: an export the case needed answered with an error.
	ReasonCallFailed Reason = "call_failed"
	// ReasonWrongHistory: provide returned other messages than were stored,
	// or in another order.
	ReasonWrongHistory Reason = "wrong_history"
)

// Failure is the error a case returns when the provider does not conform:
// the case (Case.Name) and the reason (one of Case.Reasons), wrapping what
// the provider did.
type Failure struct {
	Case   string
	Reason Reason
	Err    error
}

func (f *Failure) Error() string {
	return fmt.Sprintf("%s [%s]: %v", f.Case, f.Reason, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// SkipNotImplemented is the Skipped.Why of a case whose optional export the
// provider does not implement: the export is absent or answers
// unimplemented (SPEC section 4).
const SkipNotImplemented = "not implemented"

// Skipped is the error a case returns when it does not apply to the
// subject: the optional export it checks is not implemented, or the case
// needs input the suite was not given. A skipped case is neither a pass nor
// a failure; use IsSkipped to tell it from a Failure.
type Skipped struct {
	Case string
	Why  string
}

func (s *Skipped) Error() string { return s.Case + ": skipped: " + s.Why }

// IsSkipped reports whether err says a case was skipped, and why.
func IsSkipped(err error) (why string, ok bool) {
	var s *Skipped
	if errors.As(err, &s) {
		return s.Why, true
	}
	return "", false
}

// reasoned is how case code tags an error with its reason; the outermost
// tag wins, so a case may reclassify a helper's call_failed or
// wrong_history as something more precise. Case.Run turns it into a
// *Failure naming the case.
type reasoned struct {
	reason Reason
	err    error
}

func (r *reasoned) Error() string { return r.err.Error() }
func (r *reasoned) Unwrap() error { return r.err }

// because tags err with reason (nil stays nil).
func because(reason Reason, err error) error {
	if err == nil {
		return nil
	}
	return &reasoned{reason: reason, err: err}
}

// failf is an error with a reason.
func failf(reason Reason, format string, args ...any) error {
	return because(reason, fmt.Errorf(format, args...))
}

// skip says the case does not apply.
func skip(why string) error { return &Skipped{Why: why} }

// result gives what a case's code returned its final form: nil, a
// *Skipped or a *Failure naming the case. An error no code tagged is
// call_failed: the case code tags every other promise it checks.
func result(name string, err error) error {
	if err == nil {
		return nil
	}
	var s *Skipped
	if errors.As(err, &s) {
		return &Skipped{Case: name, Why: s.Why}
	}
	var r *reasoned
	reason := ReasonCallFailed
	if errors.As(err, &r) {
		reason = r.reason
	}
	return &Failure{Case: name, Reason: reason, Err: err}
}
