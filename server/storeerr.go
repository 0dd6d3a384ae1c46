package server

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/acpgate/acpgate/store"
)

// storeCode is the status code of a call the store failed: UNAVAILABLE
// when the store could not be reached (a PostgreSQL outage: the client
// retries, and the same call succeeds once it is back), INTERNAL for any
// other failure.
func storeCode(err error) codes.Code {
	if errors.Is(err, store.ErrUnavailable) {
		return codes.Unavailable
	}
	return codes.Internal
}
