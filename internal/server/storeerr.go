package server

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/store"
)

// storeCode is the status code of a call the store failed: DATA_LOSS when
// what was asked for is damaged (no retry brings it back), UNAVAILABLE when
// the store could not be reached (a PostgreSQL outage: the client retries,
// and the same call succeeds once it is back), INTERNAL for any other
// failure.
func storeCode(err error) codes.Code {
	switch {
	case errors.Is(err, store.ErrDamaged):
		return codes.DataLoss
	case errors.Is(err, store.ErrUnavailable):
		return codes.Unavailable
	}
	return codes.Internal
}

// journalReadError is the status for a failure to read turn turnID's
// journal (or its record, whose terminal may be kept in the journal's
// files), coded by storeCode.
func journalReadError(turnID string, err error) error {
	if errors.Is(err, store.ErrDamaged) {
		return status.Errorf(codes.DataLoss, "turn %q's journal is damaged and its events cannot be read: %v", turnID, err)
	}
	return status.Errorf(storeCode(err), "reading turn %q's journal: %v", turnID, err)
}
