// Package rpcerr holds the gRPC statuses that several parts of the
// gateway answer with, each worded once: a bound reached (with when to
// retry), and a store that failed a call.
package rpcerr

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/acpgate/acpgate/internal/store"
)

// RetryDelay is the retry_delay of a refusal for a concurrency quota or
// bound (open sessions, concurrent turns, streams): when a slot frees up
// depends on turns and sessions ending, which the gateway cannot foresee,
// so it suggests a short, fixed wait.
const RetryDelay = time.Second

// OverQuota is RESOURCE_EXHAUSTED with a RetryInfo saying when to retry.
func OverQuota(retry time.Duration, format string, args ...any) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retry)}); err == nil {
		st = d
	}
	return st.Err()
}

// Who names principal in a refusal.
func Who(principal string) string {
	if principal == "" {
		return "the anonymous caller"
	}
	return fmt.Sprintf("principal %q", principal)
}

// StoreCode is the status code of a call the store failed: DATA_LOSS when
// what was asked for is damaged (no retry brings it back), UNAVAILABLE when
// the store could not be reached (a PostgreSQL outage: the client retries,
// and the same call succeeds once it is back), INTERNAL for any other
// failure.
func StoreCode(err error) codes.Code {
	switch {
	case errors.Is(err, store.ErrDamaged):
		return codes.DataLoss
	case errors.Is(err, store.ErrUnavailable):
		return codes.Unavailable
	}
	return codes.Internal
}

// JournalRead is the status for a failure to read turn turnID's journal
// (or its record, whose terminal may be kept in the journal's files),
// coded by StoreCode.
func JournalRead(turnID string, err error) error {
	if errors.Is(err, store.ErrDamaged) {
		return status.Errorf(codes.DataLoss, "turn %q's journal is damaged and its events cannot be read: %v", turnID, err)
	}
	return status.Errorf(StoreCode(err), "reading turn %q's journal: %v", turnID, err)
}
