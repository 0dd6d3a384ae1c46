package admission

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/rpcerr"
)

// retryDelay checks that err is RESOURCE_EXHAUSTED with a RetryInfo and
// returns its delay.
func retryDelay(t *testing.T, err error) time.Duration {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("got %v, want RESOURCE_EXHAUSTED", err)
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("%v carries no RetryInfo", err)
	return 0
}

func TestAConcurrentTurnQuotaRefusesWithRetryInfoUntilATurnEnds(t *testing.T) {
	a := New(10, 0, config.Quotas{Default: config.Quota{ConcurrentTurns: 1}})
	if err := a.AdmitTurn("alice", "t1"); err != nil {
		t.Fatal(err)
	}
	if d := retryDelay(t, a.AdmitTurn("alice", "t2")); d != rpcerr.RetryDelay {
		t.Errorf("retry_delay %v, want %v", d, rpcerr.RetryDelay)
	}
	if err := a.AdmitTurn("bob", "t3"); err != nil {
		t.Errorf("bob is refused for alice's turn: %v", err)
	}
	a.TurnEnded("t1")
	a.TurnEnded("t1") // a second end gives nothing back twice
	if err := a.AdmitTurn("alice", "t4"); err != nil {
		t.Fatalf("after her turn ended: %v", err)
	}
	retryDelay(t, a.AdmitTurn("alice", "t5"))
}

func TestAnOpenSessionQuotaCountsEachSlotOnceAndTheAnonymousCallerUnderDefault(t *testing.T) {
	a := New(10, 0, config.Quotas{
		Default:    config.Quota{OpenSessions: 1},
		Principals: map[string]config.Quota{"alice": {OpenSessions: 2}},
	})
	s1, err := a.ReserveSession("", "agent", 0)
	if err != nil {
		t.Fatal(err)
	}
	retryDelay(t, func() error { _, err := a.ReserveSession("", "agent", 0); return err }())
	for range 2 {
		if _, err := a.ReserveSession("alice", "agent", 0); err != nil {
			t.Fatalf("alice, whose quota is 2: %v", err)
		}
	}
	s1.Release()
	s1.Release()
	if _, err := a.ReserveSession("", "agent", 0); err != nil {
		t.Fatalf("after its session closed: %v", err)
	}
	retryDelay(t, func() error { _, err := a.ReserveSession("", "agent", 0); return err }())
}

func TestATurnsPerMinuteQuotaSaysWhenTheNextTurnMayStart(t *testing.T) {
	a := New(10, 0, config.Quotas{Default: config.Quota{TurnsPerMinute: 2}})
	for _, id := range []string{"t1", "t2"} {
		if err := a.AdmitTurn("alice", id); err != nil {
			t.Fatal(err)
		}
		a.TurnEnded(id)
	}
	d := retryDelay(t, a.AdmitTurn("alice", "t3"))
	if d <= 20*time.Second || d > 30*time.Second {
		t.Errorf("retry_delay %v, want about 30s (one turn every 30s)", d)
	}
	// A refusal takes no token: the delay does not grow with retries.
	if d2 := retryDelay(t, a.AdmitTurn("alice", "t4")); d2 > d {
		t.Errorf("retry_delay grew from %v to %v after a refusal", d, d2)
	}
	if err := a.AdmitTurn("bob", "t5"); err != nil {
		t.Errorf("bob has his own bucket: %v", err)
	}
}

func TestAnIdleCallerIsForgotten(t *testing.T) {
	a := New(10, 0, config.Quotas{Default: config.Quota{ConcurrentTurns: 1, OpenSessions: 1}})
	s, _ := a.ReserveSession("alice", "agent", 0)
	_ = a.AdmitTurn("alice", "t1")
	a.TurnEnded("t1")
	s.Release()
	if len(a.callers) != 0 {
		t.Errorf("callers %v after everything was given back", a.callers)
	}
}

func TestATurnsPerMinuteQuotaAdmitsAgainAfterTheDelayItGave(t *testing.T) {
	const perMinute = 6000 // a token every 10ms
	a := New(10, 0, config.Quotas{Default: config.Quota{TurnsPerMinute: perMinute}})
	var err error
	for i := 0; err == nil && i < 2*perMinute; i++ {
		id := fmt.Sprint("t", i)
		if err = a.AdmitTurn("alice", id); err == nil {
			a.TurnEnded(id)
		}
	}
	d := retryDelay(t, err)
	time.Sleep(d)
	if err := a.AdmitTurn("alice", "after"); err != nil {
		t.Errorf("after waiting the %v it was told: %v", d, err)
	}
}

func TestConcurrentSessionsOfOnePrincipalNeverExceedItsQuota(t *testing.T) {
	a := New(100, 0, config.Quotas{Default: config.Quota{OpenSessions: 5}})
	var (
		wg       sync.WaitGroup
		admitted atomic.Int32
	)
	for range 50 {
		wg.Go(func() {
			if _, err := a.ReserveSession("alice", "agent", 0); err == nil {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n != 5 {
		t.Errorf("%d sessions admitted under a quota of 5", n)
	}
}
