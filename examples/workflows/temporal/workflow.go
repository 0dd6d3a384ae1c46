package temporal

import (
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// ActivityOptions are the prompt activity's timeouts and retries, chosen
// against the gateway's configuration (docs/workflows.md):
//
//   - HeartbeatTimeout well above the gateway's heartbeat_interval (15 s by
//     default): the activity heartbeats on every event, and a thinking
//     agent's stream carries a heartbeat event every heartbeat_interval,
//     so only a lost worker misses it.
//   - StartToCloseTimeout above the agent's turn_timeout: the gateway ends
//     a turn that runs too long with its own error; the activity's timeout
//     is the backstop for a worker that hangs.
//   - The retry horizon (all attempts and their backoff) inside the
//     gateway's turn_retention, so a late retry still finds the turn and
//     its request_id.
var ActivityOptions = workflow.ActivityOptions{
	StartToCloseTimeout: 35 * time.Minute,
	HeartbeatTimeout:    time.Minute,
	RetryPolicy: &temporal.RetryPolicy{
		InitialInterval:    time.Second,
		BackoffCoefficient: 2,
		MaximumInterval:    time.Minute,
		MaximumAttempts:    10,
	},
}

// PromptWorkflow runs one prompt as the Prompt activity of an Activities
// registered on the worker.
func PromptWorkflow(ctx workflow.Context, in Input) (Answer, error) {
	ctx = workflow.WithActivityOptions(ctx, ActivityOptions)
	var a *Activities
	var answer Answer
	err := workflow.ExecuteActivity(ctx, a.Prompt, in).Get(ctx, &answer)
	return answer, err
}
