package sessions

import (
	"context"
	"testing"
	"time"

	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/admission"
	"github.com/acpgate/acpgate/internal/config"
	"github.com/acpgate/acpgate/internal/store"
	"github.com/acpgate/acpgate/internal/store/memory"
)

func TestASessionAdoptedOpenIsSuspendedFromThenAndOutlivesTheSweepThatFollows(t *testing.T) {
	cfg, err := config.Parse([]byte("agents:\n  - name: a\n    command: /bin/true\n    workspace: "+t.TempDir()+"\n"), "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st := memory.New()
	// Open on a replica that is gone: no suspension recorded.
	rec := store.Session{ID: "s1", Agent: "a", Cwd: ".", CreatedAt: time.Now().Add(-time.Hour)}
	if err := st.PutSession(ctx, rec); err != nil {
		t.Fatal(err)
	}
	m := New(Options{Config: cfg, Store: st, Admission: admission.New(10, 10, cfg.Quotas), StartConfig: func(config.Agent) acp.Config { return acp.Config{} }})
	before := time.Now()
	if err := m.Adopt(ctx, rec); err != nil {
		t.Fatal(err)
	}
	m.expireSuspended(time.Now())
	susp := m.reg.lookupSuspended("s1")
	if susp == nil {
		t.Fatal("the sweep right after the adoption ended the session, as if suspended since the zero time")
	}
	if at := susp.rec.SuspendedAt; at.Before(before) || at.After(time.Now()) {
		t.Errorf("the adopted session reads suspended at %v, want the adoption's time (after %v)", at, before)
	}
	got, err := st.Session(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if !got.SuspendedAt.Equal(susp.rec.SuspendedAt) {
		t.Errorf("the record reads suspended at %v, the session %v", got.SuspendedAt, susp.rec.SuspendedAt)
	}
}
