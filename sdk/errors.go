package sdk

import "strings"

// Wrap returns an error whose text is prefix and the text of each error,
// joined by ": ", and that wraps every error for errors.Is and errors.As:
// Wrap("sqlite: provide", err) is fmt.Errorf("sqlite: provide: %w", err),
// and Wrap("sdk: decode state", abi.ErrInvalidArgument, err) is
// fmt.Errorf("sdk: decode state: %w: %w", abi.ErrInvalidArgument, err).
//
// It is for the guest's error paths: a plugin that calls no function of
// package fmt does not link it, and is about 0.7 MB smaller (build errors
// with errors.New, abi.Error and strconv too; see sdktest.CheckLean). An
// *abi.Error in errs keeps its code on the wire: the sdk answers with the
// first *abi.Error in the chain (abi.AsError).
func Wrap(prefix string, errs ...error) error {
	if len(errs) == 1 {
		return &wrappedOne{prefix: prefix, err: errs[0]}
	}
	return &wrapped{prefix: prefix, errs: errs}
}

// wrappedOne is Wrap of one error; like fmt's, it answers errors.Unwrap.
type wrappedOne struct {
	prefix string
	err    error
}

func (e *wrappedOne) Error() string { return e.prefix + ": " + e.err.Error() }
func (e *wrappedOne) Unwrap() error { return e.err }

type wrapped struct {
	prefix string
	errs   []error
}

func (e *wrapped) Error() string {
	var b strings.Builder
	b.WriteString(e.prefix)
	for _, err := range e.errs {
		b.WriteString(": ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *wrapped) Unwrap() []error { return e.errs }
