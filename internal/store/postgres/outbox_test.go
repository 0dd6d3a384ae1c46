package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/store/storetest"
)

func TestALostReplicasTurnWithATargetIsAnnouncedByTheReapThatEndsIt(t *testing.T) {
	ctx := context.Background()
	a, b, ra, _ := twoReplicas(t, shortLease)
	tr := storetest.NewTurn("notified", "r-notified", 1, 0)
	tr.NotifyURL = "https://hooks.example.com/turns"
	if _, created, err := a.Begin(ctx, tr); err != nil || !created {
		t.Fatalf("Begin: created %v, %v", created, err)
	}
	if err := a.Started(ctx, tr.ID, "s1", storetest.Events(1, 1)[0]); err != nil {
		t.Fatal(err)
	}
	beginStarted(t, a, "silent")
	waitExpired(t, b, ra)
	if _, ended, err := b.Reap(ctx, lostTerminal); err != nil || len(ended) != 2 {
		t.Fatalf("Reap: ended %v, %v; want both of a's turns", turnIDsOf(ended), err)
	}
	got, err := b.ClaimNotifications(ctx, "b", time.Now(), time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].TurnID != tr.ID || got[0].URL != tr.NotifyURL || !got[0].CreatedAt.Equal(mustGet(t, b, tr.ID).EndedAt) {
		t.Fatalf("after the reap the outbox holds %+v; want the notified turn's notification, created when it ended", got)
	}
}
