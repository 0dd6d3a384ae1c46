package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Session modes and configuration options (--modes): the agent advertises
// the modes named on the command line (the first is every session's
// initial mode) and one select option, "model" ("small", the initial value,
// or "large"), in the answers to session/new, session/load and
// session/resume. Settings live as long as the process: a session re-opened
// by a later process starts again in the initial mode and model, as an
// agent that does not keep them would, so that a test sees whether the
// client sets them again.

// Values of the "model" option.
var models = []string{"small", "large"}

// settings is one session's current mode and model.
type settings struct {
	mode, model string
}

// advertised adds the modes and options of sessionID to the result of the
// request that opened it, and resets the session's settings.
func (a *agent) advertised(sessionID string, result obj) obj {
	if len(a.cfg.modes) == 0 {
		return result
	}
	a.mu.Lock()
	a.settings[sessionID] = &settings{mode: a.cfg.modes[0], model: models[0]}
	st := *a.settings[sessionID]
	a.mu.Unlock()
	var modes []obj
	for _, id := range a.cfg.modes {
		modes = append(modes, obj{"id": id, "name": "Mode " + id, "description": "the " + id + " mode"})
	}
	result["modes"] = obj{"availableModes": modes, "currentModeId": st.mode}
	result["configOptions"] = configOptions(st)
	return result
}

// configOptions is the full set of the agent's options with st's values.
func configOptions(st settings) []obj {
	var values []obj
	for _, v := range models {
		values = append(values, obj{"value": v, "name": strings.ToUpper(v[:1]) + v[1:]})
	}
	return []obj{{"id": "model", "name": "Model", "description": "the model answering", "category": "model",
		"type": "select", "currentValue": st.model, "options": values}}
}

// settingParams are the params of session/set_mode and
// session/set_config_option.
type settingParams struct {
	SessionID string `json:"sessionId"`
	ModeID    string `json:"modeId"`
	ConfigID  string `json:"configId"`
	Value     any    `json:"value"`
}

// settingRequest decodes a settings request and finds its session's
// settings, answering the request with an error when it has none.
func (a *agent) settingRequest(m *message) (settingParams, *settings, bool) {
	var p settingParams
	_ = json.Unmarshal(m.Params, &p)
	a.mu.Lock()
	st := a.settings[p.SessionID]
	a.mu.Unlock()
	if st == nil {
		a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("unknown session %q (or no --modes)", p.SessionID))
		return p, nil, false
	}
	return p, st, true
}

// setMode serves session/set_mode.
func (a *agent) setMode(m *message) {
	p, st, ok := a.settingRequest(m)
	if !ok {
		return
	}
	if !slices.Contains(a.cfg.modes, p.ModeID) {
		a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("unknown mode %q", p.ModeID))
		return
	}
	a.mu.Lock()
	st.mode = p.ModeID
	a.mu.Unlock()
	a.reply(m.ID, obj{})
}

// setConfigOption serves session/set_config_option.
func (a *agent) setConfigOption(m *message) {
	p, st, ok := a.settingRequest(m)
	if !ok {
		return
	}
	value, _ := p.Value.(string)
	if p.ConfigID != "model" || !slices.Contains(models, value) {
		a.replyError(m.ID, codeInvalidParams, fmt.Sprintf("config option %q has no value %v", p.ConfigID, p.Value))
		return
	}
	a.mu.Lock()
	st.model = value
	now := *st
	a.mu.Unlock()
	a.reply(m.ID, obj{"configOptions": configOptions(now)})
}

// switchMode is the mode directive: the agent changes its own mode and
// says so.
func (t *turn) switchMode(id string) {
	t.a.mu.Lock()
	if st := t.a.settings[t.sessionID]; st != nil {
		st.mode = id
	}
	t.a.mu.Unlock()
	t.update(obj{"sessionUpdate": "current_mode_update", "currentModeId": id})
}

// switchModel is the model directive: the agent changes its own model and
// sends the full set of options, as config_option_update carries.
func (t *turn) switchModel(value string) {
	t.a.mu.Lock()
	st := t.a.settings[t.sessionID]
	if st == nil {
		st = &settings{}
	}
	st.model = value
	now := *st
	t.a.mu.Unlock()
	t.update(obj{"sessionUpdate": "config_option_update", "configOptions": configOptions(now)})
}

// reportSettings is the settings directive's chunk.
func (t *turn) reportSettings() string {
	t.a.mu.Lock()
	defer t.a.mu.Unlock()
	st := t.a.settings[t.sessionID]
	if st == nil {
		return "settings:none"
	}
	return fmt.Sprintf("mode:%s model:%s", st.mode, st.model)
}
