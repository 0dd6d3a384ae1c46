package sqlite

import (
	"errors"
	"fmt"

	"github.com/acpgate/acpgate/internal/store"
)

// damagedError is an ErrDamaged with what was found and its cause.
type damagedError struct {
	msg   string
	cause error
}

func (e *damagedError) Error() string        { return e.msg }
func (e *damagedError) Unwrap() error        { return e.cause }
func (e *damagedError) Is(target error) bool { return target == store.ErrDamaged }

// damaged is an ErrDamaged worded by format; a %w in it names the cause.
func damaged(format string, args ...any) error {
	err := fmt.Errorf(format, args...)
	return &damagedError{msg: err.Error(), cause: errors.Unwrap(err)}
}
