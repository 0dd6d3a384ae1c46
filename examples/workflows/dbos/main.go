// Command dbos is a DBOS worker that runs one agent prompt as a durable
// workflow through acpgate: the workflow's one step calls Prompt with a
// request_id made of the workflow id and the step's id, reads the turn to
// its terminal (re-attaching with WatchTurn when the stream breaks) and maps
// the ending onto DBOS's retries: an outcome is the step's result, a
// retryable ending is retried, any other ending fails the workflow for good.
//
// Start it, kill it, start it again with the same flags: DBOS recovers the
// workflow from PostgreSQL, the step re-attaches to the turn its first
// execution started, and the agent runs once.
//
//	dbos -database postgres://… -gateway 127.0.0.1:7070 -workflow-id job-42 -agent claude -prompt "…"
//
// It prints one line when the workflow ends, `completed {"turn_id":…,"text":…}`
// (exit status 0) or `failed <message>` (exit status 3), and logs each event
// the step receives to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// Input is the workflow's input, checkpointed by DBOS with the workflow.
type Input struct {
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
}

// shutdownTimeout bounds DBOS's shutdown once the workflow ended.
const shutdownTimeout = 5 * time.Second

// exitFailed is the exit status when the workflow failed.
const exitFailed = 3

func main() {
	database := flag.String("database", "", "PostgreSQL URL of DBOS's system database")
	gateway := flag.String("gateway", "127.0.0.1:7070", "acpgate's address")
	workflowID := flag.String("workflow-id", "", "the workflow's id: the same id after a restart recovers the same workflow")
	agent := flag.String("agent", "demo", "the configured agent to prompt")
	prompt := flag.String("prompt", "", "the prompt's text")
	flag.Parse()
	if *database == "" || *workflowID == "" {
		fmt.Fprintln(os.Stderr, "dbos: -database and -workflow-id are required")
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err := run(*database, *gateway, *workflowID, Input{Agent: *agent, Prompt: *prompt}); err != nil {
		fmt.Println("failed", err)
		os.Exit(exitFailed)
	}
}

func run(database, gateway, workflowID string, in Input) error {
	conn, err := grpc.NewClient(gateway, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	gw := acpgatev1.NewAgentGatewayClient(conn)

	ctx, err := dbos.NewContext(context.Background(), dbos.Config{AppName: "acpgate-dbos-example", DatabaseURL: database, Logger: slog.Default()})
	if err != nil {
		return fmt.Errorf("starting DBOS: %w", err)
	}
	// The workflow's registered name, not the Go function's, is what
	// recovery looks up: keep it when refactoring.
	w := &worker{gw: gw}
	dbos.RegisterWorkflow(ctx, w.prompt, dbos.WithWorkflowName("acpgate-prompt"))
	// Launch recovers the workflows a killed worker left pending.
	if err := dbos.Launch(ctx); err != nil {
		return fmt.Errorf("launching DBOS: %w", err)
	}
	defer dbos.Shutdown(ctx, shutdownTimeout)

	// A workflow id is an idempotency key: for a workflow that exists
	// (recovered by Launch, or ended) this returns a handle to it.
	handle, err := dbos.RunWorkflow(ctx, w.prompt, in, dbos.WithWorkflowID(workflowID))
	if err != nil {
		return err
	}
	answer, err := handle.GetResult()
	if err != nil {
		return err
	}
	b, err := json.Marshal(answer)
	if err != nil {
		return err
	}
	fmt.Println("completed", string(b))
	return nil
}

// worker holds what the workflow needs beyond its input.
type worker struct{ gw acpgatev1.AgentGatewayClient }

// prompt is the workflow: one step that runs the turn.
func (w *worker) prompt(ctx dbos.Context, in Input) (Answer, error) {
	return runPrompt(ctx, w.gw, in.Agent, in.Prompt)
}
