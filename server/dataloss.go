package server

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/store"
)

// journalReadError is the status for a failure to read turn turnID's
// journal: DATA_LOSS when the journal is damaged (its events are gone, and
// no retry brings them back), INTERNAL otherwise.
func journalReadError(turnID string, err error) error {
	if errors.Is(err, store.ErrDamaged) {
		return status.Errorf(codes.DataLoss, "turn %q's journal is damaged and its events cannot be read: %v", turnID, err)
	}
	return status.Errorf(codes.Internal, "reading turn %q's journal: %v", turnID, err)
}
