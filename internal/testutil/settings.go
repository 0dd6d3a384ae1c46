package testutil

import acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"

// StreamedSettings returns the last mode a turn's current_mode events
// carried and the last value of the single option its config_options
// events carried (the test agents offer one, the model): what a client
// learns from the stream when the agent changes its settings itself.
func StreamedSettings(events []*acpgatev1.PromptEvent) (mode, option string) {
	for _, e := range events {
		if m := e.GetCurrentMode(); m != nil {
			mode = m.GetModeId()
		}
		if o := e.GetConfigOptions(); o != nil && len(o.GetOptions()) == 1 {
			option = o.GetOptions()[0].GetCurrentValue()
		}
	}
	return mode, option
}
