package sessions

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
)

// Session settings: the modes and configuration options an agent advertises
// for a session (acp.Settings). Clients change them with SetSessionMode and
// SetSessionConfigOption, or ask for them at CreateSession; the agent
// changes them with its own updates. Every change is written to the
// session's record, so that re-opening the session after its agent went
// away (a restart, the idle timeout) sets them again: an agent that
// restores a session does not necessarily restore its mode.

// Settable finds the open session whose settings a call changes, when the
// caller may see it. A suspended one has no agent to ask, nor a known set of
// modes to check against: it must be re-opened first.
func (m *Manager) Settable(ctx context.Context, id string) (*Live, error) {
	live, err := m.Lookup(ctx, id)
	if err != nil && m.Suspended(ctx, id) != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "session %q is SUSPENDED: its settings can be changed once it is re-opened (by its next Prompt, or CreateSession with load_session_id)", id)
	}
	return live, err
}

// SetMode switches the session's mode; the error is a gRPC status.
func (l *Live) SetMode(ctx context.Context, mode string) error {
	if err := l.sess.SetMode(ctx, mode); err != nil {
		return settingStatus(err)
	}
	return nil
}

// SetConfigOption sets one configuration option of the session; the
// error is a gRPC status.
func (l *Live) SetConfigOption(ctx context.Context, id, value string) error {
	if err := l.sess.SetConfigOption(ctx, id, value); err != nil {
		return settingStatus(err)
	}
	return nil
}

// settingStatus is the status of a failed settings change.
func settingStatus(err error) error {
	switch {
	case errors.Is(err, acp.ErrInvalidSetting):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, acp.ErrClosed):
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	return StatusOf(err)
}

// wantedSettings are settings to apply to a session right after it is
// opened: the ones CreateSession asked for, or a re-opened session's
// recorded ones.
type wantedSettings struct {
	mode    string
	options map[string]string
	// strict fails the opening when a setting cannot be applied: the
	// caller asked for it. A recorded setting the agent no longer offers
	// is dropped with a warning instead: the conversation matters more.
	strict bool
}

// apply sets what differs from the session's current settings: mode first,
// then options by id, so that every run applies them in the same order.
func (w wantedSettings) apply(ctx context.Context, log *slog.Logger, sess *acp.Session) error {
	fail := func(err error) error {
		if w.strict {
			return settingStatus(err)
		}
		log.WarnContext(ctx, "a recorded session setting could not be set again after re-opening; the session goes on without it", "session", sess.ID(), "err", err)
		return nil
	}
	if w.mode != "" && w.mode != sess.Settings().CurrentMode {
		if err := sess.SetMode(ctx, w.mode); err != nil {
			if err := fail(err); err != nil {
				return err
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(w.options)) {
		if sess.Settings().Values()[id] == w.options[id] {
			continue
		}
		if err := sess.SetConfigOption(ctx, id, w.options[id]); err != nil {
			if err := fail(err); err != nil {
				return err
			}
		}
	}
	return nil
}

// watchSettings keeps live's record equal to its settings from now on.
// The record is written on the goroutine that made the change, which for
// the agent's own updates is its reader: a settings change is rare, and
// written before the reader goes on, it is in the store before the turn
// that carried it ends, so a shutdown right after cannot lose it.
func (m *Manager) watchSettings(live *Live) {
	live.sess.OnSettingsChanged(func() { m.recordSettings(live) })
	m.recordSettings(live)
}

// recordSettings writes live's current settings to its record when they
// differ from the recorded ones.
func (m *Manager) recordSettings(live *Live) {
	live.recordMu.Lock()
	defer live.recordMu.Unlock()
	old := live.record()
	if old == nil {
		return
	}
	st := live.sess.Settings()
	if old.Mode == st.CurrentMode && maps.Equal(old.ConfigOptions, st.Values()) {
		return
	}
	rec := *old
	rec.Mode, rec.ConfigOptions = st.CurrentMode, st.Values()
	ctx := context.Background()
	if err := m.store.PutSession(ctx, rec); err != nil {
		m.log.Error("a session's settings could not be recorded; re-opening it will not set them again", "session", rec.ID, "err", err)
		return
	}
	if !live.keep(&rec) && m.reg.lookupSuspended(rec.ID) == nil && !m.admit.IsDraining() {
		// Closed for good while its record was being written: the write
		// must not bring the record back.
		m.unrecord(rec.ID)
	}
}

// settingsProto fills a Session's settings from an open session's.
func settingsProto(st acp.Settings, out *acpgatev1.Session) {
	out.Modes, out.CurrentModeId, out.ConfigOptions = st.Modes, st.CurrentMode, st.Options
}

// recordedSettingsProto fills a suspended Session's settings from its
// record: what re-opening will set again.
func recordedSettingsProto(mode string, options map[string]string, out *acpgatev1.Session) {
	out.CurrentModeId = mode
	for _, id := range slices.Sorted(maps.Keys(options)) {
		out.ConfigOptions = append(out.ConfigOptions, &acpgatev1.ConfigOption{Id: id, CurrentValue: options[id]})
	}
}
