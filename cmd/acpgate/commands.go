package main

// The subcommands that make one call to the gateway and print its answer.
//
// Each is one entry of oneCallCommands; oneCall does the rest, the same
// way for all of them: it adds --addr, parses the flags, checks the
// arguments, dials, makes the call, and turns a failed call's status into
// the exit code (dial.go).

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/acpgate/acpgate/internal/exitcode"

	"google.golang.org/protobuf/proto"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// unaryCall is what a one-call subcommand does once its flags are parsed.
type unaryCall struct {
	// check says what is wrong with the positional arguments (or the
	// flags), or returns "" when they will do. It runs before dialing.
	check func(args []string) string
	// do makes the call and prints its answer to stdout. An error is the
	// call's; its status decides the exit code.
	do func(ctx context.Context, client acpgatev1.AgentGatewayClient, args []string, stdout io.Writer) error
}

// oneCall returns the run function of a one-call subcommand. setup registers
// the subcommand's flags other than --addr on fs and returns its call, whose
// functions read those flags.
func oneCall(setup func(fs *flag.FlagSet) unaryCall) commandFunc {
	return func(ctx context.Context, fs *flag.FlagSet, args []string, stdout, stderr io.Writer) int {
		addr := addrFlag(fs)
		call := setup(fs)
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		if msg := call.check(fs.Args()); msg != "" {
			return usageError(fs, stderr, msg)
		}
		client, closeConn, code := dial(*addr, stderr)
		if code != exitcode.OK {
			return code
		}
		defer closeConn()
		if err := call.do(ctx, client, fs.Args(), stdout); err != nil {
			return statusExit(err, ctx.Err() != nil, stderr)
		}
		return exitcode.OK
	}
}

// oneCallCommands are the one-call subcommands, in the order of acpgate's
// usage.
var oneCallCommands = []clientCommand{
	{
		name: "agents", usage: "[--json]", brief: "list the configured agents",
		synopsis: "[--addr ADDR] [--json]", summary: "Lists the configured agents.",
		run: oneCall(func(fs *flag.FlagSet) unaryCall {
			asJSON := jsonFlag(fs, "the response")
			return unaryCall{
				check: noArguments("agents"),
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, _ []string, stdout io.Writer) error {
					resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
					if err != nil {
						return err
					}
					show(stdout, *asJSON, resp, printAgents)
					return nil
				},
			}
		}),
	},
	{
		name: "sessions", usage: "[--json]", brief: "list the open sessions",
		synopsis: "[--addr ADDR] [--json]", summary: "Lists the open sessions.",
		run: oneCall(func(fs *flag.FlagSet) unaryCall {
			asJSON := jsonFlag(fs, "the response")
			return unaryCall{
				check: noArguments("sessions"),
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, _ []string, stdout io.Writer) error {
					resp, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
					if err != nil {
						return err
					}
					show(stdout, *asJSON, resp, printSessions)
					return nil
				},
			}
		}),
	},
	{
		name: "turns", usage: "[--session ID] [--agent NAME] [--limit N] [--json]",
		brief:    "list turns, running and ended, newest first",
		synopsis: "[--addr ADDR] [--session ID] [--agent NAME] [--limit N] [--json]",
		summary: "Lists the turns the gateway keeps (running, or ended within its turn_retention), newest first: " +
			"state, attempt, request id, times, last seq and how each ended (outcome, or the error's class).",
		run: oneCall(func(fs *flag.FlagSet) unaryCall {
			session := fs.String("session", "", "only this session's turns")
			agent := fs.String("agent", "", "only this agent's turns")
			limit := fs.Int("limit", 50, "list at most N turns; 0 lists them all")
			asJSON := jsonFlag(fs, "the turns (as one ListTurnsResponse)")
			return unaryCall{
				check: func(args []string) string {
					if msg := noArguments("turns")(args); msg != "" {
						return msg
					}
					if *limit < 0 {
						return "--limit is 0 (all) or more"
					}
					return ""
				},
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, _ []string, stdout io.Writer) error {
					resp, err := listTurns(ctx, client, &acpgatev1.ListTurnsRequest{SessionId: *session, Agent: *agent}, *limit)
					if err != nil {
						return err
					}
					show(stdout, *asJSON, resp, printTurns)
					return nil
				},
			}
		}),
	},
	{
		name: "turn", usage: "[--json] TURN_ID", brief: "describe a turn, running or ended",
		synopsis: "[--addr ADDR] [--json] TURN_ID",
		summary:  "Describes a turn, running or ended; acpgate watch shows its events.",
		run: oneCall(func(fs *flag.FlagSet) unaryCall {
			asJSON := jsonFlag(fs, "the Turn")
			return unaryCall{
				check: func(args []string) string {
					if len(args) != 1 || args[0] == "" {
						return "give exactly one TURN_ID"
					}
					return ""
				},
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, args []string, stdout io.Writer) error {
					turn, err := client.GetTurn(ctx, &acpgatev1.GetTurnRequest{TurnId: args[0]})
					if err != nil {
						return err
					}
					show(stdout, *asJSON, turn, printTurn)
					return nil
				},
			}
		}),
	},
	{
		name: "open", usage: "--agent NAME [--cwd DIR] [--load ID] [--json]",
		brief:    "open a session (prints its id) for prompt --session",
		synopsis: "[--addr ADDR] --agent NAME [--cwd DIR] [--load SESSION_ID] [--json]",
		summary:  "Opens a session on an agent and prints its id, for prompt --session, cancel, permit and close.",
		run: oneCall(func(fs *flag.FlagSet) unaryCall {
			agent := fs.String("agent", "", "the configured agent")
			cwd := fs.String("cwd", "", "the working directory, relative to the agent's workspace")
			load := fs.String("load", "", "resume this ACP session (session/load), when the agent supports it")
			asJSON := jsonFlag(fs, "the Session")
			return unaryCall{
				check: func(args []string) string {
					if msg := noArguments("open")(args); msg != "" {
						return msg
					}
					if *agent == "" {
						return "--agent is required"
					}
					return ""
				},
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, _ []string, stdout io.Writer) error {
					sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: *agent, Cwd: *cwd, LoadSessionId: *load})
					if err != nil {
						return err
					}
					show(stdout, *asJSON, sess, func(w io.Writer, s *acpgatev1.Session) { fmt.Fprintln(w, s.GetId()) })
					return nil
				},
			}
		}),
	},
	{
		name: "close", usage: "SESSION_ID", brief: "close a session and stop its agent",
		synopsis: "[--addr ADDR] SESSION_ID", summary: "Closes a session and stops its agent.",
		run: oneCall(func(*flag.FlagSet) unaryCall {
			return unaryCall{
				check: oneSessionID,
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, args []string, stdout io.Writer) error {
					if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: args[0]}); err != nil {
						return err
					}
					fmt.Fprintf(stdout, "session %s: closed\n", args[0])
					return nil
				},
			}
		}),
	},
	{
		name: "cancel", usage: "SESSION_ID", brief: "cancel the turn running on a session",
		synopsis: "[--addr ADDR] SESSION_ID", summary: "Cancels the turn running on a session.",
		run: oneCall(func(*flag.FlagSet) unaryCall {
			return unaryCall{
				check: oneSessionID,
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, args []string, stdout io.Writer) error {
					resp, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: args[0]})
					if err != nil {
						return err
					}
					if resp.GetCancelled() {
						fmt.Fprintf(stdout, "session %s: the running turn was asked to cancel\n", args[0])
					} else {
						fmt.Fprintf(stdout, "session %s: no turn was running\n", args[0])
					}
					return nil
				},
			}
		}),
	},
	{
		name: "permit", usage: "SESSION_ID REQUEST_ID [OPTION_ID]",
		brief:    "answer a permission request (no OPTION_ID: cancelled)",
		synopsis: "[--addr ADDR] SESSION_ID REQUEST_ID [OPTION_ID]",
		summary:  "Answers a permission request of a running turn (the ask policy) with one of its options; without OPTION_ID the request is cancelled.",
		run: oneCall(func(*flag.FlagSet) unaryCall {
			return unaryCall{
				check: func(args []string) string {
					if n := len(args); n < 2 || n > 3 || args[0] == "" || args[1] == "" {
						return "give SESSION_ID, REQUEST_ID and, to choose an option, OPTION_ID"
					}
					return ""
				},
				do: func(ctx context.Context, client acpgatev1.AgentGatewayClient, args []string, stdout io.Writer) error {
					req := &acpgatev1.ResolvePermissionRequest{SessionId: args[0], RequestId: args[1]}
					if len(args) == 3 {
						req.OptionId = args[2]
					}
					if _, err := client.ResolvePermission(ctx, req); err != nil {
						return err
					}
					answer := "cancelled"
					if req.GetOptionId() != "" {
						answer = "option " + req.GetOptionId()
					}
					fmt.Fprintf(stdout, "session %s: permission request %s answered: %s\n", req.GetSessionId(), req.GetRequestId(), answer)
					return nil
				},
			}
		}),
	},
}

// maxTurnsPage is the largest page ListTurns serves.
const maxTurnsPage = 500

// listTurns reads the pages of ListTurns from req on, until limit turns
// (0: no limit) or the last page. The answer's next_page_token continues
// after its last turn, or is empty when there are no more.
func listTurns(ctx context.Context, client acpgatev1.AgentGatewayClient, req *acpgatev1.ListTurnsRequest, limit int) (*acpgatev1.ListTurnsResponse, error) {
	all := &acpgatev1.ListTurnsResponse{}
	for {
		req.PageSize = maxTurnsPage
		if limit > 0 {
			req.PageSize = int32(min(limit-len(all.Turns), maxTurnsPage))
		}
		page, err := client.ListTurns(ctx, req)
		if err != nil {
			return nil, err
		}
		all.Turns = append(all.Turns, page.GetTurns()...)
		all.NextPageToken = page.GetNextPageToken()
		if limit > 0 && len(all.Turns) > limit {
			// A longer page than asked for: where the next one starts is
			// not known.
			all.Turns, all.NextPageToken = all.Turns[:limit], ""
		}
		if all.NextPageToken == "" || len(page.GetTurns()) == 0 || (limit > 0 && len(all.Turns) == limit) {
			return all, nil
		}
		req.PageToken = all.NextPageToken
	}
}

// noArguments is the check of a subcommand that takes no positional
// arguments.
func noArguments(name string) func(args []string) string {
	return func(args []string) string {
		if len(args) != 0 {
			return name + " takes no arguments"
		}
		return ""
	}
}

// oneSessionID is the check of a subcommand whose one argument is a session
// id.
func oneSessionID(args []string) string {
	if len(args) != 1 || args[0] == "" {
		return "give exactly one SESSION_ID"
	}
	return ""
}

// jsonFlag registers --json, which prints what (the call's answer) as one
// protojson line instead of for people.
func jsonFlag(fs *flag.FlagSet, what string) *bool {
	return fs.Bool("json", false, "print "+what+" as one protojson line")
}

// show prints a call's answer: as one protojson line with --json, else with
// human.
func show[M proto.Message](stdout io.Writer, asJSON bool, answer M, human func(io.Writer, M)) {
	if asJSON {
		writeJSONLine(stdout, answer)
		return
	}
	human(stdout, answer)
}
