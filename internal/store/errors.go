package store

import "errors"

// Errors of a backend's own that callers act on, whichever backend it is:
// they are compared with errors.Is, so that the gateway answers them
// without knowing which store it has.
var (
	// ErrDamaged is, by errors.Is, what reading a journal returns when
	// its files do not hold what the turn's record says they do: shorter
	// than committed (a power loss before they were synced), missing, or
	// holding an event that does not decode. The events are lost, not the
	// gateway broken: a caller reports it as such (gRPC's DATA_LOSS), and
	// nothing retried will bring them back.
	ErrDamaged = errors.New("the journal is damaged")
	// ErrUnavailable marks a failure to reach the database (refused,
	// reset, shutting down, timed out): the same call may succeed once it
	// is back, so a caller answers it as retryable (UNAVAILABLE), not as
	// a fault.
	ErrUnavailable = errors.New("the database is unreachable")
)
