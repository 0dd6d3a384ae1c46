package store

import (
	"errors"
	"fmt"
)

// ErrDamaged is, by errors.Is, what reading a journal returns when its
// files do not hold what the turn's record says they do: shorter than
// committed (a power loss before they were synced), missing, or holding
// an event that does not decode. The events are lost, not the gateway
// broken: a caller reports it as such (gRPC's DATA_LOSS), and nothing
// retried will bring them back.
var ErrDamaged = errors.New("the journal is damaged")

// damagedError is an ErrDamaged with what was found and its cause.
type damagedError struct {
	msg   string
	cause error
}

func (e *damagedError) Error() string        { return e.msg }
func (e *damagedError) Unwrap() error        { return e.cause }
func (e *damagedError) Is(target error) bool { return target == ErrDamaged }

// damaged is an ErrDamaged worded by format; a %w in it names the cause.
func damaged(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &damagedError{msg: err.Error(), cause: errors.Unwrap(err)}
}
