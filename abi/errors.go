package abi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Code classifies an error a plugin reports. A plugin sets an error with
// error_set as the JSON of Error; plain text is read as code internal.
type Code string

// Error codes of ABI v1. A host maps an unknown code to CodeInternal.
const (
	CodeInvalidArgument    Code = "invalid_argument"
	CodeNotFound           Code = "not_found"
	CodeFailedPrecondition Code = "failed_precondition"
	CodePermissionDenied   Code = "permission_denied"
	CodeResourceExhausted  Code = "resource_exhausted"
	CodeUnavailable        Code = "unavailable"
	CodeUnimplemented      Code = "unimplemented"
	CodeInternal           Code = "internal"
)

// Sentinel errors, one per Code, for errors.Is.
var (
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrNotFound           = errors.New("not found")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrResourceExhausted  = errors.New("resource exhausted")
	ErrUnavailable        = errors.New("unavailable")
	ErrUnimplemented      = errors.New("unimplemented")
	ErrInternal           = errors.New("internal error")
)

var codeSentinels = map[Code]error{
	CodeInvalidArgument:    ErrInvalidArgument,
	CodeNotFound:           ErrNotFound,
	CodeFailedPrecondition: ErrFailedPrecondition,
	CodePermissionDenied:   ErrPermissionDenied,
	CodeResourceExhausted:  ErrResourceExhausted,
	CodeUnavailable:        ErrUnavailable,
	CodeUnimplemented:      ErrUnimplemented,
	CodeInternal:           ErrInternal,
}

// Known reports whether c is a code of this ABI version.
func (c Code) Known() bool { _, ok := codeSentinels[c]; return ok }

// Error is an error that crosses the boundary: a plugin's reported failure,
// or a host capability's answer to a plugin.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
}

// Error concatenates rather than formats: plugins report errors through this
// type, and a guest that never formats does not link package fmt.
func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// Is makes errors.Is(err, ErrNotFound) true for an Error with CodeNotFound.
func (e *Error) Is(target error) bool {
	s, ok := codeSentinels[e.Code]
	if !ok {
		s = ErrInternal
	}
	return s == target
}

// Errorf returns an *Error with the given code.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// DecodeError reads what a plugin passed to error_set. JSON of the form
// {"code":..., "message":...} keeps its code (unknown codes become internal);
// anything else becomes an internal error carrying the text.
func DecodeError(b []byte) *Error {
	var e Error
	if json.Unmarshal(b, &e) == nil && e.Code != "" {
		if !e.Code.Known() {
			e.Message = fmt.Sprintf("unknown code %q: %s", clipText(string(e.Code), 64), e.Message)
			e.Code = CodeInternal
		}
		e.Message = clipText(e.Message, MaxErrorMessage)
		return &e
	}
	return &Error{Code: CodeInternal, Message: clipText(string(b), MaxErrorMessage)}
}

// MaxErrorMessage is the most of a decoded error's message that is kept:
// a message is for a person, and one a plugin made megabytes long would
// otherwise travel into every log line and terminal that shows it.
const MaxErrorMessage = 4096

// clipText is s, or its first max bytes (not cutting a character in two)
// and a note of how much was left out.
func clipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + fmt.Sprintf("... (%d more bytes)", len(s)-cut)
}

// AsError converts any error to an *Error for the wire: an *Error in the
// chain keeps its code, a sentinel of this package gives its code, anything
// else is internal.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	for c, s := range codeSentinels {
		if errors.Is(err, s) {
			return &Error{Code: c, Message: err.Error()}
		}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}
