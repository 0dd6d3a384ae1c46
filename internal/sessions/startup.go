package sessions

import (
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// startupStatus is what an operator needs to tell a healthy agent from one
// that cannot start: how long its last start-up took, and its last failure
// since then. Warm and cold start-ups both report here, so that an agent
// whose warm pool keeps failing is as visible as one whose sessions do.
type startupStatus struct {
	mu       sync.Mutex
	took     time.Duration // the last successful start-up's; 0: none yet
	failure  string        // the last failure since the last success; "" when none
	failedAt time.Time
	retryAt  time.Time // when the warm pool tries again; zero without a pool
}

// succeeded records a start-up that took took, clearing the last failure.
func (s *startupStatus) succeeded(took time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.took = took
	s.failure, s.failedAt, s.retryAt = "", time.Time{}, time.Time{}
}

// failed records a start-up that failed with message at now; retryAt is
// when the warm pool tries again (zero: it does not).
func (s *startupStatus) failed(message string, now, retryAt time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failure, s.failedAt, s.retryAt = message, now, retryAt
}

// fill sets a ListAgents entry's start-up fields.
func (s *startupStatus) fill(a *acpgatev1.Agent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.took > 0 {
		a.LastStartupDuration = durationpb.New(s.took)
	}
	if s.failure != "" {
		f := &acpgatev1.StartupFailure{Message: s.failure, At: timestamppb.New(s.failedAt)}
		if !s.retryAt.IsZero() {
			f.RetryAt = timestamppb.New(s.retryAt)
		}
		a.LastStartupFailure = f
	}
}
