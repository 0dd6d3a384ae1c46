package main

// The subcommands that make one call to the gateway and print its answer.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	acpgatev1 "github.com/acpgate/acpgate/gen/acpgate/v1"
)

// ---------------------------------------------------------------- agents

func runAgents(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("agents", "[--addr ADDR] [--json]", "Lists the configured agents.", stderr)
	addr := addrFlag(fs)
	asJSON := fs.Bool("json", false, "print the response as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "agents takes no arguments")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.ListAgents(ctx, &acpgatev1.ListAgentsRequest{})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, resp)
		return exitOK
	}
	if len(resp.GetAgents()) == 0 {
		fmt.Fprintln(stdout, "no agents configured")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tDESCRIPTION\tPERMISSIONS\tFS\tCAPABILITIES")
	for _, a := range resp.GetAgents() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n",
			oneLine(a.GetName()), firstNonEmpty(oneLine(a.GetDescription()), "-"),
			firstNonEmpty(a.GetPermissionPolicy(), "-"), fsAccess(a), describeCapabilities(a.GetCapabilities()))
	}
	_ = tw.Flush()
	return exitOK
}

// fsAccess renders an agent's file-system access as "r/w", "r/-", "-/-"...
func fsAccess(a *acpgatev1.Agent) string {
	r, w := "-", "-"
	if a.GetFsRead() {
		r = "r"
	}
	if a.GetFsWrite() {
		w = "w"
	}
	return r + "/" + w
}

// describeCapabilities renders what the agent advertised, or says it is not
// known yet.
func describeCapabilities(c *acpgatev1.AgentCapabilities) string {
	if c == nil {
		return "(unknown until a session starts)"
	}
	parts := []string{fmt.Sprintf("acp v%d", c.GetProtocolVersion())}
	if c.GetAgentName() != "" {
		id := c.GetAgentName()
		if c.GetAgentVersion() != "" {
			id += " " + c.GetAgentVersion()
		}
		parts = append(parts, oneLine(id))
	}
	var feats []string
	for _, f := range []struct {
		on   bool
		name string
	}{
		{c.GetLoadSession(), "load"},
		{c.GetPromptImage(), "image"},
		{c.GetPromptAudio(), "audio"},
		{c.GetPromptEmbeddedContext(), "context"},
	} {
		if f.on {
			feats = append(feats, f.name)
		}
	}
	if len(feats) > 0 {
		parts = append(parts, strings.Join(feats, ","))
	}
	if len(c.GetAuthMethods()) > 0 {
		parts = append(parts, "auth: "+strings.Join(c.GetAuthMethods(), ","))
	}
	return strings.Join(parts, "; ")
}

// -------------------------------------------------------------- sessions

func runSessions(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("sessions", "[--addr ADDR] [--json]", "Lists the open sessions.", stderr)
	addr := addrFlag(fs)
	asJSON := fs.Bool("json", false, "print the response as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "sessions takes no arguments")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.ListSessions(ctx, &acpgatev1.ListSessionsRequest{})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, resp)
		return exitOK
	}
	if len(resp.GetSessions()) == 0 {
		fmt.Fprintln(stdout, "no open sessions")
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tAGENT\tSTATE\tTURNS\tCWD")
	for _, s := range resp.GetSessions() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n",
			oneLine(s.GetId()), oneLine(s.GetAgent()), stateName(s.GetState()), s.GetTurns(), s.GetCwd())
	}
	_ = tw.Flush()
	return exitOK
}

// stateName renders SESSION_STATE_RUNNING as "running".
func stateName(s acpgatev1.SessionState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "SESSION_STATE_"))
}

// ---------------------------------------------------------------- cancel

func runCancel(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("cancel", "[--addr ADDR] SESSION_ID", "Cancels the turn running on a session.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError(fs, stderr, "give exactly one SESSION_ID")
	}
	id := fs.Arg(0)
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	resp, err := client.Cancel(ctx, &acpgatev1.CancelRequest{SessionId: id})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if resp.GetCancelled() {
		fmt.Fprintf(stdout, "session %s: the running turn was asked to cancel\n", id)
	} else {
		fmt.Fprintf(stdout, "session %s: no turn was running\n", id)
	}
	return exitOK
}

// ---------------------------------------------------------------- open, close, permit

func runOpen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("open", "[--addr ADDR] --agent NAME [--cwd DIR] [--load SESSION_ID] [--json]",
		"Opens a session on an agent and prints its id, for prompt --session, cancel, permit and close.", stderr)
	addr := addrFlag(fs)
	agent := fs.String("agent", "", "the configured agent")
	cwd := fs.String("cwd", "", "the working directory, relative to the agent's workspace")
	load := fs.String("load", "", "resume this ACP session (session/load), when the agent supports it")
	asJSON := fs.Bool("json", false, "print the Session as one protojson line")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 0 {
		return usageError(fs, stderr, "open takes no arguments")
	}
	if *agent == "" {
		return usageError(fs, stderr, "--agent is required")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	sess, err := client.CreateSession(ctx, &acpgatev1.CreateSessionRequest{Agent: *agent, Cwd: *cwd, LoadSessionId: *load})
	if err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	if *asJSON {
		writeJSONLine(stdout, sess)
		return exitOK
	}
	fmt.Fprintln(stdout, sess.GetId())
	return exitOK
}

func runClose(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("close", "[--addr ADDR] SESSION_ID", "Closes a session and stops its agent.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() != 1 || fs.Arg(0) == "" {
		return usageError(fs, stderr, "give exactly one SESSION_ID")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	if _, err := client.CloseSession(ctx, &acpgatev1.CloseSessionRequest{SessionId: fs.Arg(0)}); err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	fmt.Fprintf(stdout, "session %s: closed\n", fs.Arg(0))
	return exitOK
}

func runPermit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("permit", "[--addr ADDR] SESSION_ID REQUEST_ID [OPTION_ID]",
		"Answers a permission request of a running turn (the ask policy) with one of its options; without OPTION_ID the request is cancelled.", stderr)
	addr := addrFlag(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if n := fs.NArg(); n < 2 || n > 3 || fs.Arg(0) == "" || fs.Arg(1) == "" {
		return usageError(fs, stderr, "give SESSION_ID, REQUEST_ID and, to choose an option, OPTION_ID")
	}
	client, closeConn, code := dial(*addr, stderr)
	if code != exitOK {
		return code
	}
	defer closeConn()
	req := &acpgatev1.ResolvePermissionRequest{SessionId: fs.Arg(0), RequestId: fs.Arg(1), OptionId: fs.Arg(2)}
	if _, err := client.ResolvePermission(ctx, req); err != nil {
		return statusExit(err, ctx.Err() != nil, stderr)
	}
	answer := "cancelled"
	if req.GetOptionId() != "" {
		answer = "option " + req.GetOptionId()
	}
	fmt.Fprintf(stdout, "session %s: permission request %s answered: %s\n", req.GetSessionId(), req.GetRequestId(), answer)
	return exitOK
}
