package acp

import (
	"log/slog"
	"testing"
)

func TestAMessageForASessionThatLeftASharedProcessReachesNoOtherSession(t *testing.T) {
	c := &Conn{log: slog.New(slog.DiscardHandler)}
	a, b := c.newSession(), c.newSession()
	for id, s := range map[string]*Session{"a": a, "b": b} {
		c.attach(s)
		s.setID(id)
		c.opened(s, id)
	}
	if c.route("a") != a || c.route("b") != b {
		t.Fatal("open sessions are not routed to by their ids")
	}
	if c.detach(a) {
		t.Fatal("the first session to leave stopped the process under the other")
	}
	if got := c.route("a"); got != nil {
		t.Errorf("a message for the session that left reached session %q", got.ID())
	}
	if !c.detach(b) {
		t.Error("the last session to leave was not told to stop the process")
	}
}

func TestAProcessThatServedOneSessionGivesItMessagesForAnyID(t *testing.T) {
	c := &Conn{log: slog.New(slog.DiscardHandler)}
	s := c.newSession()
	c.attach(s)
	s.setID("a")
	c.opened(s, "a")
	// The session itself then ignores an update for another id, as
	// it always has, and serves a request naming none.
	if c.route("") != s || c.route("other") != s {
		t.Error("a single session's process does not route messages for other ids to it")
	}
}
