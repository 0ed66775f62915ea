package builtin

import (
	"errors"
	"fmt"
)

// ErrorKind classifies runtime errors as rule failures do (spec §10.9).
type ErrorKind string

// The runtime error kinds of spec §10.9.
const (
	AttributeError      ErrorKind = "attribute_error"
	KeyError            ErrorKind = "key_error"
	TypeError           ErrorKind = "type_error"
	ValueError          ErrorKind = "value_error"
	ZeroDivision        ErrorKind = "zero_division"
	RegexError          ErrorKind = "regex_error"
	JSONError           ErrorKind = "json_error"
	FlowError           ErrorKind = "flow_error"
	DetectorUnavailable ErrorKind = "detector_unavailable"
	DetectorError       ErrorKind = "detector_error"
	BudgetExceeded      ErrorKind = "budget_exceeded"
)

// RuntimeError is a runtime error of the policy language. The evaluator
// turns it into a rule failure positioned at the failing expression.
type RuntimeError struct {
	Kind ErrorKind
	Msg  string
	Err  error // underlying cause, may be nil
}

// Error returns the message.
func (e *RuntimeError) Error() string { return e.Msg }

// Unwrap returns the cause.
func (e *RuntimeError) Unwrap() error { return e.Err }

// Errorf returns a *RuntimeError of the given kind.
func Errorf(kind ErrorKind, format string, args ...any) error {
	return &RuntimeError{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// ErrNoProvider is wrapped by the errors that report a model-backed or
// external capability with no provider configured (spec §13.4).
var ErrNoProvider = errors.New("no provider")

// NoProviderError returns the load-time error of spec §13.4 for detector
// name and configuration key.
func NoProviderError(name, configKey string) error {
	return fmt.Errorf("detector %s has %w (configure %s)", name, ErrNoProvider, configKey)
}

// KindOf returns the kind of a runtime error; other errors are
// detector_error (an implementation returned a plain error).
func KindOf(err error) ErrorKind {
	var re *RuntimeError
	if errors.As(err, &re) {
		return re.Kind
	}
	return DetectorError
}
