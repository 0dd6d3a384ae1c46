package acp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp/translate"
)

// A session's settings: the modes and configuration options its agent
// advertised when the session was opened (session/new, session/load or
// session/resume), their current values, and the changes to them, whether
// the client asked for them (session/set_mode, session/set_config_option)
// or the agent made them (current_mode_update, config_option_update).
// Requests are checked against what was advertised before they are sent,
// so that a caller learns the allowed values from the gateway rather than
// from whatever error text an agent chooses.

// Settings is a session's modes and configuration options.
type Settings struct {
	// Modes are the advertised modes, in the agent's order; empty when it
	// advertised none.
	Modes []*acpgatev1.SessionMode
	// CurrentMode is the current mode's id; "" without modes.
	CurrentMode string
	// Options are the advertised configuration options with their current
	// values, in the agent's order.
	Options []*acpgatev1.ConfigOption
}

// Values returns the options' current values by option id; nil without
// options.
func (st Settings) Values() map[string]string {
	if len(st.Options) == 0 {
		return nil
	}
	values := make(map[string]string, len(st.Options))
	for _, o := range st.Options {
		values[o.GetId()] = o.GetCurrentValue()
	}
	return values
}

// option returns the advertised option with id, or nil.
func (st Settings) option(id string) *acpgatev1.ConfigOption {
	for _, o := range st.Options {
		if o.GetId() == id {
			return o
		}
	}
	return nil
}

func (st Settings) clone() Settings {
	out := Settings{CurrentMode: st.CurrentMode}
	for _, m := range st.Modes {
		out.Modes = append(out.Modes, proto.Clone(m).(*acpgatev1.SessionMode))
	}
	for _, o := range st.Options {
		out.Options = append(out.Options, proto.Clone(o).(*acpgatev1.ConfigOption))
	}
	return out
}

// applySettings applies u to st. The options are copied: the event that
// carried them is the client's, and a later SetConfigOption changes the
// session's.
func applySettings(st *Settings, u translate.SettingsUpdate) {
	if u.Mode != "" {
		st.CurrentMode = u.Mode
	}
	if u.HasOptions {
		st.Options = Settings{Options: u.Options}.clone().Options
	}
}

// ErrInvalidSetting is a mode or option value the agent did not advertise
// for the session; the error wrapping it names the allowed ones.
var ErrInvalidSetting = errors.New("not advertised by the agent")

// Primitives named by capability_not_supported when an agent advertised no
// modes, or no options.
const (
	MethodSetMode         = "session/set_mode"
	MethodSetConfigOption = "session/set_config_option"
)

// Settings returns the session's modes and options as last known.
func (s *Session) Settings() Settings { return s.settings.get() }

// OnSettingsChanged makes fn be called after each change of the session's
// settings, by the agent or by SetMode and SetConfigOption, outside the
// session's lock and possibly on the connection's reader, which waits for
// it: fn must not wait for the agent.
// It replaces an earlier fn.
func (s *Session) OnSettingsChanged(fn func()) { s.settings.onChanged(fn) }

// SetMode switches the session to one of its advertised modes.
func (s *Session) SetMode(ctx context.Context, modeID string) error {
	st := s.Settings()
	if len(st.Modes) == 0 {
		return &Error{Proto: s.interp.CapabilityNotSupported(MethodSetMode)}
	}
	ids := make([]string, len(st.Modes))
	for i, m := range st.Modes {
		ids[i] = m.GetId()
	}
	if !slices.Contains(ids, modeID) {
		return fmt.Errorf("mode %q: %w; the session's modes are %s", modeID, ErrInvalidSetting, quoteAll(ids))
	}
	if err := s.setting(ctx, MethodSetMode, func(meta map[string]any) any {
		return setModeParams{Meta: meta, SessionID: s.ID(), ModeID: modeID}
	}, nil); err != nil {
		return err
	}
	s.settings.change(func(st *Settings) { st.CurrentMode = modeID })
	return nil
}

// SetConfigOption sets one of the session's advertised options to one of
// its allowed values ("true" or "false" for a boolean option).
func (s *Session) SetConfigOption(ctx context.Context, optionID, value string) error {
	st := s.Settings()
	if len(st.Options) == 0 {
		return &Error{Proto: s.interp.CapabilityNotSupported(MethodSetConfigOption)}
	}
	opt := st.option(optionID)
	if opt == nil {
		ids := make([]string, len(st.Options))
		for i, o := range st.Options {
			ids[i] = o.GetId()
		}
		return fmt.Errorf("config option %q: %w; the session's options are %s", optionID, ErrInvalidSetting, quoteAll(ids))
	}
	allowed := make([]string, len(opt.GetValues()))
	for i, v := range opt.GetValues() {
		allowed[i] = v.GetValue()
	}
	if !slices.Contains(allowed, value) {
		return fmt.Errorf("value %q of config option %q: %w; its values are %s", value, optionID, ErrInvalidSetting, quoteAll(allowed))
	}
	var answer struct {
		ConfigOptions []translate.WireOption `json:"configOptions"`
	}
	if err := s.setting(ctx, MethodSetConfigOption, func(meta map[string]any) any {
		p := setOptionParams{Meta: meta, SessionID: s.ID(), ConfigID: optionID, Value: value}
		if opt.GetType() == translate.OptionBoolean {
			p.Type, p.Value = translate.OptionBoolean, value == "true"
		}
		return p
	}, &answer); err != nil {
		return err
	}
	s.settings.change(func(st *Settings) {
		if answer.ConfigOptions != nil {
			// The agent answers with the full set: setting one option may
			// change others (a model's reasoning levels, say).
			st.Options = translate.ConfigOptions(answer.ConfigOptions)
			return
		}
		for _, o := range st.Options {
			if o.GetId() == optionID {
				o.CurrentValue = value
			}
		}
	})
	return nil
}

// setting makes a settings request of an open session.
func (s *Session) setting(ctx context.Context, method string, params func(meta map[string]any) any, result any) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if result == nil {
		result = new(json.RawMessage)
	}
	return s.call(ctx, method, params, result)
}

// sessionSettings are a session's modes and config options as last
// known, and whom to tell of a change. They have a lock of their own, taken
// inside the session's and never around it.
type sessionSettings struct {
	mu      sync.Mutex
	st      Settings
	changed func()
}

func (ss *sessionSettings) get() Settings {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.st.clone()
}

func (ss *sessionSettings) onChanged(fn func()) {
	ss.mu.Lock()
	ss.changed = fn
	ss.mu.Unlock()
}

// change applies change under the lock, then tells the OnSettingsChanged
// function.
func (ss *sessionSettings) change(change func(*Settings)) {
	ss.mu.Lock()
	change(&ss.st)
	fn := ss.changed
	ss.mu.Unlock()
	if fn != nil {
		fn()
	}
}

// apply applies an agent's update, and returns the OnSettingsChanged
// function for the caller to call once it holds no lock; nil when the
// update changes nothing.
func (ss *sessionSettings) apply(u translate.SettingsUpdate) func() {
	if !u.Changes() {
		return nil
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	applySettings(&ss.st, u)
	return ss.changed
}

// adopt takes the modes and options of the answer to session/new,
// session/load or session/resume. An agent whose settings do not decode
// still gets its session, without settings: they are an extra.
func (ss *sessionSettings) adopt(result json.RawMessage, log *slog.Logger) {
	modes, current, options, err := translate.SessionSettings(result)
	if err != nil {
		log.Warn("the agent's session modes and config options do not decode; the session has none", "err", err)
		return
	}
	ss.mu.Lock()
	ss.st = Settings{Modes: modes, CurrentMode: current, Options: options}
	ss.mu.Unlock()
}

type setModeParams struct {
	Meta      map[string]any `json:"_meta,omitempty"`
	SessionID string         `json:"sessionId"`
	ModeID    string         `json:"modeId"`
}

type setOptionParams struct {
	Meta      map[string]any `json:"_meta,omitempty"`
	SessionID string         `json:"sessionId"`
	ConfigID  string         `json:"configId"`
	Type      string         `json:"type,omitempty"`
	Value     any            `json:"value"`
}

// quoteAll lists values for an error message: "a", "b"; "none" when empty.
func quoteAll(values []string) string {
	if len(values) == 0 {
		return "none"
	}
	q := make([]string, len(values))
	for i, v := range values {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}
