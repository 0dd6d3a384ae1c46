package admission

import (
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// sessionLimitReason marks a RESOURCE_EXHAUSTED that a session limit of
// this gateway (limits.max_sessions, an agent's max_sessions) caused, as
// opposed to a caller's quota: another replica, with limits of its own, may
// take the session (package server's placeElsewhere), and a client can
// tell the two apart from the error's details.
const sessionLimitReason = "SESSION_LIMIT"

// errorDomain is the domain of the ErrorInfo details the gateway attaches.
const errorDomain = "acpgate"

// sessionLimit is the refusal of a session at a limit.
func sessionLimit(format string, args ...any) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: sessionLimitReason, Domain: errorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// AtSessionLimit reports whether err is a session limit's refusal: with
// several replicas, another may take the session.
func AtSessionLimit(err error) bool {
	if status.Code(err) != codes.ResourceExhausted {
		return false
	}
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == sessionLimitReason && info.GetDomain() == errorDomain {
			return true
		}
	}
	return false
}
