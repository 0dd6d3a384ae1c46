package translate

import (
	"encoding/json"
	"strconv"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// A session's modes and configuration options as the agent sends them
// (in the answer to session/new, session/load and session/resume, and in
// current_mode_update and config_option_update), as the contract's.

// SettingsUpdate is what an agent's update changes of a session's
// settings: the mode (when not ""), the options (when HasOptions).
type SettingsUpdate struct {
	Mode       string
	Options    []*acpgatev1.ConfigOption
	HasOptions bool
}

// Changes reports whether u changes anything.
func (u SettingsUpdate) Changes() bool { return u.Mode != "" || u.HasOptions }

// Merge adds a later update to u.
func (u *SettingsUpdate) Merge(later SettingsUpdate) {
	if later.Mode != "" {
		u.Mode = later.Mode
	}
	if later.HasOptions {
		u.Options, u.HasOptions = later.Options, true
	}
}

// The wire shapes of ACP's SessionModeState and SessionConfigOption, as
// schema.json defines them. They are the gateway's own rather than the
// SDK's so that a select's values decode the same whether the agent groups
// them or not.
type wireSettings struct {
	Modes *struct {
		AvailableModes []struct {
			ID          string  `json:"id"`
			Name        string  `json:"name"`
			Description *string `json:"description"`
		} `json:"availableModes"`
		CurrentModeID string `json:"currentModeId"`
	} `json:"modes"`
	ConfigOptions []WireOption `json:"configOptions"`
}

// WireOption is an option as the agent sends it.
type WireOption struct {
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Description  *string         `json:"description"`
	Category     *string         `json:"category"`
	Type         string          `json:"type"`
	CurrentValue json.RawMessage `json:"currentValue"`
	// Options are a select's values: SessionConfigSelectOption entries,
	// or groups of them (SessionConfigSelectGroup).
	Options []wireValue `json:"options"`
}

// wireValue is a select's value, or a group of values when Group is set.
type wireValue struct {
	Value       string      `json:"value"`
	Name        string      `json:"name"`
	Description *string     `json:"description"`
	Group       string      `json:"group"`
	Options     []wireValue `json:"options"`
}

// The option types ACP defines.
const (
	OptionSelect  = "select"
	OptionBoolean = "boolean"
)

// SessionSettings decodes the modes and options of the answer to
// session/new, session/load or session/resume: the advertised modes, the
// current one, and the options with their current values.
func SessionSettings(result json.RawMessage) (modes []*acpgatev1.SessionMode, currentMode string, options []*acpgatev1.ConfigOption, err error) {
	var w wireSettings
	if err := json.Unmarshal(result, &w); err != nil {
		return nil, "", nil, err
	}
	if w.Modes != nil {
		currentMode = w.Modes.CurrentModeID
		for _, m := range w.Modes.AvailableModes {
			modes = append(modes, &acpgatev1.SessionMode{Id: m.ID, Name: m.Name, Description: deref(m.Description)})
		}
	}
	return modes, currentMode, ConfigOptions(w.ConfigOptions), nil
}

// ConfigOptions converts the options an agent sent to the contract's:
// a select's groups flattened into its values, an option of a type this
// version does not know left out.
func ConfigOptions(in []WireOption) []*acpgatev1.ConfigOption {
	var out []*acpgatev1.ConfigOption
	for _, w := range in {
		o := &acpgatev1.ConfigOption{Id: w.ID, Name: w.Name, Description: deref(w.Description), Type: w.Type, Category: deref(w.Category)}
		switch w.Type {
		case OptionBoolean:
			var b bool
			_ = json.Unmarshal(w.CurrentValue, &b)
			o.CurrentValue = strconv.FormatBool(b)
			o.Values = []*acpgatev1.ConfigOptionValue{{Value: "true", Name: "true"}, {Value: "false", Name: "false"}}
		case OptionSelect, "":
			o.Type = OptionSelect
			if err := json.Unmarshal(w.CurrentValue, &o.CurrentValue); err != nil {
				o.CurrentValue = string(w.CurrentValue)
			}
			o.Values = selectValues(w.Options, "")
		default:
			// A type of a later revision: ACP says a client ignores it, and
			// the agent goes on with its default value.
			continue
		}
		out = append(out, o)
	}
	return out
}

func selectValues(in []wireValue, group string) []*acpgatev1.ConfigOptionValue {
	var out []*acpgatev1.ConfigOptionValue
	for _, v := range in {
		if v.Group != "" || v.Options != nil {
			out = append(out, selectValues(v.Options, v.Name)...)
			continue
		}
		out = append(out, &acpgatev1.ConfigOptionValue{Value: v.Value, Name: v.Name, Description: deref(v.Description), Group: group})
	}
	return out
}
