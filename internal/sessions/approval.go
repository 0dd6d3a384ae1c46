package sessions

import (
	"context"
	"fmt"
	"log/slog"
	"slices"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
	"github.com/acpgate/acpgate/internal/acp"
	"github.com/acpgate/acpgate/internal/config"
)

// selfApprovingModes are the session modes in which agents approve their
// own tools without asking the client (session/request_permission): Qwen
// Code's "auto" (its ACP default: a classifier approves), "auto-edit" and
// "yolo"; codex-acp's "auto" (writes in the workspace) and "full-access";
// Gemini CLI's "autoEdit" and "yolo"; Claude Code's "acceptEdits" and
// "bypassPermissions". A session left in one would never bring the gateway
// a request, so a permission_policy of ask or reject would decide nothing.
var selfApprovingModes = []string{"auto", "auto-edit", "autoEdit", "yolo", "full-access", "acceptEdits", "bypassPermissions"}

// askingModes are the modes that ask before a write or a command, as the
// agents name them, in order of preference: "default" (Qwen Code, Gemini
// CLI, Claude Code), "read-only" (codex-acp).
var askingModes = []string{"default", "read-only"}

// matchApproval puts a session that its agent started in a self-approving
// mode into the agent's asking mode, when the gateway's policy is not
// allow and the caller chose no mode. An agent that advertises no asking
// mode is left as it is (docs/agents.md says what each enforces). The
// change is logged: an operator reading the agent's own documentation
// would otherwise expect its default mode.
func matchApproval(ctx context.Context, log *slog.Logger, policy config.Policy, callerMode string, sess *acp.Session) error {
	st := sess.Settings()
	if policy == config.PolicyAllow || callerMode != "" || !slices.Contains(selfApprovingModes, st.CurrentMode) {
		return nil
	}
	for _, asking := range askingModes {
		if !slices.ContainsFunc(st.Modes, func(m *acpgatev1.SessionMode) bool { return m.GetId() == asking }) {
			continue
		}
		if err := sess.SetMode(ctx, asking); err != nil {
			return fmt.Errorf("the agent started the session in mode %q, which runs tools without asking, and did not take mode %q, which permission_policy %s needs: %w (set permission_policy: allow to keep its mode)", st.CurrentMode, asking, policy, err)
		}
		log.InfoContext(ctx, "moved the session out of a mode in which the agent approves its own tools, to match permission_policy", "session", sess.ID(), "from", st.CurrentMode, "to", asking, "permission_policy", string(policy))
		return nil
	}
	return nil
}
