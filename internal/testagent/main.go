// Command testagent is a scriptable fake Agent Client Protocol (ACP) agent for
// tests of acpgate. It speaks JSON-RPC 2.0 on stdin/stdout, one JSON object per
// line, protocol version 1, written by hand (no ACP SDK) so that it can also
// break the wire protocol on purpose.
//
// Each session/prompt carries its own script: the text of all "text" content
// blocks of the prompt, concatenated as-is (no separator is added), is read
// one directive per line. The script is parsed completely before anything runs:
// an unknown directive or a bad argument answers the prompt with JSON-RPC error
// -32602 naming the line, and nothing else is sent.
//
// # Command-line flags
//
//	--protocol-version N        protocolVersion reported by initialize (default 1).
//	--auth-methods a,b          advertised authMethods: [{"id":"a","name":"a"},...].
//	                            authenticate answers {} for an advertised methodId,
//	                            error -32602 otherwise.
//	--load-session              advertise agentCapabilities.loadSession. session/load
//	                            then replays a user_message_chunk "earlier question"
//	                            and an agent_message_chunk "earlier answer" before
//	                            answering {}. Without the flag session/load is -32601.
//	--sessions-dir DIR          keep each session's history (the text of every prompt
//	                            it received) in DIR/<sessionId>.json, as agents that
//	                            keep sessions on disk do. session/load (with
//	                            --load-session) then re-opens a session of an earlier
//	                            process: it replays, for each earlier prompt, a
//	                            user_message_chunk with the prompt's text and an
//	                            agent_message_chunk "replayed answer <n>", then
//	                            answers {}; an unknown session is -32602.
//	--resume-session            advertise agentCapabilities.sessionCapabilities.resume
//	                            ({}): session/resume re-opens a session kept in
//	                            --sessions-dir without replaying anything and answers
//	                            {}. Without the flag session/resume is -32601.
//	--session-new-error C:MSG   answer session/new and session/load with JSON-RPC
//	                            error code C, message MSG.
//	--exit-on-initialize N      exit with status N on receiving initialize, unanswered.
//	--initialize-delay D        sleep D (a Go duration) before answering initialize:
//	                            a stand-in for a slow-starting agent (Node start-up,
//	                            loading credentials).
//	--count-starts FILE         append the line "start" to FILE as the process starts
//	                            (tests count how often the agent was spawned).
//	--stray-startup             print the non-JSON line "starting up..." on stdout
//	                            before reading anything.
//	--unique-sessions           mint session ids "sess-<pid>-<n>" instead, unique across agent
//	                            processes (as real agents' UUIDs are); <pid> as in
//	                            "spawned:<pid>" (see pidRef).
//	--count-prompts FILE        append the line "prompt" to FILE for every
//	                            session/prompt received (tests count how often
//	                            the agent was really asked).
//	--record-meta FILE          append {"method":M,"meta":M's params._meta or null}
//	                            as a JSON line to FILE for every request and
//	                            notification received, before handling it (tests
//	                            check what the client propagates, e.g. traceparent).
//	--record-params FILE        append {"method":M,"id":ID,"params":P} as a JSON line
//	                            to FILE for every request and notification received
//	                            (no id for a notification), before
//	                            handling it (tests check the mcpServers of session/new
//	                            and the requestId of a $/cancel_request).
//	--mcp-capabilities LIST     advertise agentCapabilities.mcpCapabilities with the
//	                            comma-separated transports LIST (http, sse) true; none
//	                            by default (stdio only, as ACP requires of every agent).
//	--modes A,B                 advertise the session modes A and B (the first is a
//	                            session's initial mode; name "Mode A", description
//	                            "the A mode") and the select config option "model"
//	                            (values small, initially, and large) in the answers to
//	                            session/new, session/load and session/resume; serve
//	                            session/set_mode and session/set_config_option (which
//	                            answers the full configOptions). Settings are kept per
//	                            process: a session re-opened by another process starts
//	                            again in mode A with model small.
//	--hang-on METHOD            never answer requests of METHOD (say initialize or
//	                            session/new): an agent that hangs at start-up. A
//	                            $/cancel_request naming such a request is answered
//	                            with error -32800, as ACP asks.
//	--prompt-capabilities LIST  the promptCapabilities advertised at initialize:
//	                            a comma-separated subset of image, audio and
//	                            embeddedContext, or "none" for a text-only agent
//	                            (default "image,embeddedContext").
//	--commands A,B              right after answering session/new or session/load,
//	                            send an available_commands_update offering the
//	                            commands A and B (description "the A command"), as
//	                            agents that advertise slash commands do.
//
// # Agent-side methods
//
//	initialize     -> {"protocolVersion":N,"agentCapabilities":{"loadSession":F,
//	                   "promptCapabilities":{"image":true,"audio":false,
//	                   "embeddedContext":true}},"agentInfo":{"name":"testagent",
//	                   "version":"1.0.0"},"authMethods":[...]}
//	authenticate   -> {} or -32602
//	session/new    -> {"sessionId":"sess-<n>"}, n counting from 1 per process
//	session/load   -> replay (see --load-session, --sessions-dir), then {}
//	session/resume -> {} (see --resume-session)
//	session/set_mode, session/set_config_option -> see --modes; -32602 for an
//	                  unknown session, mode, option or value
//	session/prompt -> runs the script; default answer {"stopReason":"end_turn"}.
//	                  The sessionId must come from session/new or session/load
//	                  (otherwise -32602).
//	session/cancel -> (notification) cancels the session's running turns: the
//	                  script stops before its next directive (sleep and hang are
//	                  interrupted) and the prompt is answered
//	                  {"stopReason":"cancelled"}. Waits for the client's answer to
//	                  permission/fs/terminal requests are NOT interrupted: ACP
//	                  requires the client to answer them (permission with outcome
//	                  cancelled).
//	$/cancel_request -> (notification) answers a --hang-on request it names
//	                  with error -32800; ignored otherwise.
//	anything else  -> -32601 for requests; unknown notifications are ignored.
//
// A line that is not JSON gets a -32700 error with id null. The agent's own
// requests use integer ids 0, 1, 2, ... per process; a client response is
// matched to them by that id (a string id such as "0" does not match); a
// response matching no pending request is reported on stderr and ignored.
// Nothing else is ever written to stderr except by the stderr directive.
// On stdin EOF the process exits with status 0, even mid-script.
//
// # Script directives
//
// Blank lines are ignored. TEXT arguments of chunk, chunk@ID, thought, user
// and write unescape the two-character sequences \n (newline) and \\
// (backslash). Updates are session/update notifications for the prompt's
// session.
//
//	chunk TEXT            agent_message_chunk {"type":"text","text":TEXT}, no messageId
//	chunk@ID TEXT         the same with "messageId":"ID"
//	thought TEXT          agent_thought_chunk with text TEXT
//	user TEXT             user_message_chunk with text TEXT
//	chunk_meta K=V TEXT   agent_message_chunk with text TEXT and the update's
//	                      "_meta":{"K":"V"}
//	image                 agent_message_chunk {"type":"image","data":"aGk=","mimeType":"image/png"}
//	tool ID TITLE         tool_call {"toolCallId":ID,"title":TITLE,"kind":"read","status":"pending"}
//	tool_done ID          tool_call_update {"toolCallId":ID,"status":"completed",
//	                      "content":[{"type":"content","content":{"type":"text","text":"done"}}]}
//	plan A|B|C            plan, one entry per |-separated item (priority medium, status pending)
//	usage SIZE USED [AMOUNT CURRENCY]  usage_update {"size":SIZE,"used":USED}, with
//	                      "cost":{"amount":AMOUNT,"currency":CURRENCY} when given
//	raw KIND              an update {"sessionUpdate":KIND,"x":1}
//	permission ID         session/request_permission for tool call ID with options
//	                      allow (allow_once) and reject (reject_once); waits for the
//	                      answer, then chunk "permission:<optionId>",
//	                      "permission:cancelled", "permission-error:<code>:<message>"
//	                      or "permission-invalid:<result>"
//	elicit SCHEMA         elicitation/create {"mode":"form","message":"please answer",
//	                      "requestedSchema":SCHEMA} (SCHEMA is JSON, the rest of
//	                      the line); waits for the answer, then chunk
//	                      "elicitation:<action>[:<content JSON>]" or
//	                      "elicitation-error:<code>:<message>"
//	elicit_url            the same in url mode ("elicitationId":"e-1",
//	                      "url":"https://example.com/connect")
//	read PATH [LINE [LIMIT]]  fs/read_text_file; chunk "read:<content>" or
//	                      "read-error:<code>:<message>"
//	write PATH TEXT       fs/write_text_file with content TEXT; chunk "write:ok" or
//	                      "write-error:<code>:<message>"
//	osread PATH           read PATH with the operating system, not through the
//	                      client; chunk "osread:<content>" or "osread-error:<err>"
//	procs WORD            chunk "procs:<pid>,...;environ:<pid>,..." (or
//	                      "environ:none"): every process /proc lists, and those
//	                      whose environment it can read and which holds WORD
//	unmountproc           try to unmount /proc, here and in nested user and mount
//	                      namespaces, only where /proc is the agent's own; chunk
//	                      "unmountproc:direct:<r>;nested:<r>", each "refused: <err>"
//	                      or "unmounted"
//	oswrite PATH TEXT     write TEXT to PATH with the operating system (created
//	                      or truncated, mode 0644); chunk "oswrite:ok" or
//	                      "oswrite-error:<err>"
//	terminal              terminal/create {"command":"echo","args":["testagent"]};
//	                      chunk "terminal:ok" or "terminal-error:<code>"
//	sleep MS              pause MS milliseconds (interrupted by cancel)
//	hang                  wait forever (interrupted by cancel)
//	withdraw_after MS     from now on every request of the turn's own (permission,
//	                      elicit, read, write, terminal) that is unanswered after
//	                      MS milliseconds is withdrawn with $/cancel_request
//	                      {"requestId":ID}; the script still waits for the
//	                      answer, which ACP requires (an error -32800 shows as
//	                      e.g. "permission-error:-32800:...")
//	ignore_cancel         from now on session/cancel is ignored for this turn: sleep
//	                      and hang run to their end, and the script goes on to its
//	                      normal ending (so "ignore_cancel" + "hang" never answers)
//	flood N SIZE          N agent_message_chunk updates, messageId "flood", text of
//	                      SIZE 'x' bytes each, written in one buffered burst
//	flood_timed N SIZE [RATE]  N agent_message_chunk updates, messageId "flood",
//	                      text of SIZE bytes (at least 30): the chunk's index as
//	                      9 digits, a space, its send time in Unix nanoseconds as
//	                      19 digits, a space, then 'x' padding. Without RATE (or
//	                      0) one buffered burst, each chunk stamped as it enters
//	                      the buffer; with RATE, paced at RATE chunks/s: every
//	                      wake-up (about 1 ms apart) writes and flushes the
//	                      chunks then due, each stamped as it is written.
//	                      Cancel stops the flood early.
//	stderr BYTES          write exactly BYTES bytes of 'e' lines to stderr
//	stray TEXT            write TEXT verbatim (not JSON, not unescaped) as a stdout line
//	oversized BYTES       one agent_message_chunk line whose text alone is BYTES
//	                      bytes, so the whole line is longer than BYTES
//	mode ID               the agent switches the session to mode ID itself and
//	                      sends current_mode_update {"currentModeId":ID}
//	model VALUE           the agent sets the session's option model to VALUE itself
//	                      and sends config_option_update with the full configOptions
//	settings              chunk "mode:<id> model:<value>" with the session's current
//	                      settings (--modes), or "settings:none"
//	history               chunk `history via METHOD: "P1","P2"`: METHOD is how this
//	                      process opened the session (session/new, session/load or
//	                      session/resume) and P1, P2... the texts of the session's
//	                      earlier prompts, Go-quoted (empty without --sessions-dir)
//	grandchild            start /bin/sleep 300 (same process group, stdio on
//	                      /dev/null) and chunk "grandchild:<pid>"
//	spawn [--setsid] SECONDS  start /bin/sleep SECONDS holding the agent's stdout
//	                      open (stdin and stderr on /dev/null), with --setsid in
//	                      a session of its own (so outside the agent's process
//	                      group), never killed by the agent, and chunk
//	                      "spawned:<pid>": the pid /proc shows, or, where /proc
//	                      is the agent's own, "<pid>@<PID namespace inode>"
//	stall                 stop reading stdin for good: the line being read when
//	                      the agent stalls, and every later one, is never handled
//	                      (not even stdin EOF: only a signal ends the process),
//	                      so the client's writes block once the pipe is full
//	readflood N PATH      send N fs/read_text_file requests for PATH in one burst,
//	                      without waiting for their answers (which are dropped)
//	reqflood N            send N requests of the unknown method "testagent/flood"
//	                      (params {}) in one burst, without waiting for answers
//
// The pids that grandchild and spawn report are the ones /proc shows: when
// the agent runs in a PID namespace of its own, not the namespace's numbers.
//
// Endings: the first one reached ends the script; later lines are not run.
//
//	stop REASON               {"stopReason":REASON}, any string
//	stop_meta REASON K=V      {"stopReason":REASON,"_meta":{"K":"V"}}
//	stop_usage REASON IN OUT  {"stopReason":REASON,"usage":{"inputTokens":IN,
//	                          "outputTokens":OUT,"totalTokens":IN+OUT}}
//	error CODE MESSAGE...     JSON-RPC error response {"code":CODE,"message":MESSAGE}
//	neither                   {"jsonrpc":"2.0","id":<id>} (no result, no error)
//	exit N                    exit with status N at once, unanswered
//	close_stdout              close stdout and keep running, unanswered, until
//	                          stdin EOF (or a kill)
//	garbage_response          the truncated line {"jsonrpc":"2.0","id":<id>,"result":
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// config is the agent-level behaviour chosen on the command line.
type config struct {
	protocolVersion int
	authMethods     []string
	loadSession     bool
	resumeSession   bool
	closeSession    bool      // advertise sessionCapabilities.close and answer session/close
	listSessions    bool      // advertise sessionCapabilities.list and answer session/list (list.go)
	deleteSessions  bool      // advertise sessionCapabilities.delete and answer session/delete
	sessionsDir     string    // "": sessions live as long as the process
	sessionNewErr   *rpcError // nil: session/new succeeds
	exitOnInit      int       // < 0: answer initialize normally
	initDelay       time.Duration
	countStarts     string // a file that gets a line per process start
	strayStartup    bool
	uniqueSessions  bool
	commands        []string        // advertised right after session/new and session/load
	hangOn          string          // a method never answered
	countPrompts    string          // a file that gets a line per session/prompt
	recordMeta      string          // a file that gets each client message's method and _meta
	recordParams    string          // a file that gets each client message's method and params (record.go)
	mcpCaps         []string        // mcpCapabilities advertised: http, sse
	promptCaps      map[string]bool // promptCapabilities advertised, by name
	modes           []string        // advertised session modes, the first initial (modes.go)
}

func parseFlags(args []string) (config, error) {
	fs := flag.NewFlagSet("testagent", flag.ContinueOnError)
	var cfg config
	var auth, newErr, commands, promptCaps, modes, mcpCaps string
	fs.IntVar(&cfg.protocolVersion, "protocol-version", 1, "protocolVersion reported at initialize")
	fs.StringVar(&auth, "auth-methods", "", "comma-separated authMethods ids to advertise")
	fs.BoolVar(&cfg.loadSession, "load-session", false, "advertise and implement session/load")
	fs.BoolVar(&cfg.deleteSessions, "delete-sessions", false, "advertise sessionCapabilities.delete and answer session/delete")
	fs.BoolVar(&cfg.listSessions, "list-sessions", false, "advertise sessionCapabilities.list and answer session/list with two pages of one session each")
	fs.BoolVar(&cfg.closeSession, "close-session", false, "advertise sessionCapabilities.close and answer session/close")
	fs.BoolVar(&cfg.resumeSession, "resume-session", false, "advertise sessionCapabilities.resume and implement session/resume (needs --sessions-dir)")
	fs.StringVar(&cfg.sessionsDir, "sessions-dir", "", "keep every session's history in this directory, for session/load and session/resume by a later process")
	fs.StringVar(&newErr, "session-new-error", "", "CODE:MESSAGE error for session/new and session/load")
	fs.IntVar(&cfg.exitOnInit, "exit-on-initialize", -1, "exit with this status on initialize")
	fs.DurationVar(&cfg.initDelay, "initialize-delay", 0, "sleep this long before answering initialize")
	fs.StringVar(&cfg.countStarts, "count-starts", "", "append a line to this file as the process starts")
	fs.BoolVar(&cfg.strayStartup, "stray-startup", false, `print "starting up..." on stdout first`)
	fs.BoolVar(&cfg.uniqueSessions, "unique-sessions", false, `mint session ids "sess-<pid>-<n>", unique across processes`)
	fs.StringVar(&commands, "commands", "", "comma-separated command names to advertise (available_commands_update) right after session/new and session/load")
	fs.StringVar(&cfg.countPrompts, "count-prompts", "", "append a line to this file for every session/prompt received")
	fs.StringVar(&cfg.recordMeta, "record-meta", "", `append {"method":M,"meta":_meta} as a JSON line to this file for every request and notification received`)
	fs.StringVar(&cfg.recordParams, "record-params", "", `append {"method":M,"id":ID,"params":P} as a JSON line to this file for every request and notification received`)
	fs.StringVar(&mcpCaps, "mcp-capabilities", "", "comma-separated mcpCapabilities to advertise: http, sse")
	fs.StringVar(&promptCaps, "prompt-capabilities", "image,embeddedContext", `promptCapabilities to advertise: image, audio, embeddedContext, or "none"`)
	fs.StringVar(&modes, "modes", "", "comma-separated session mode ids to advertise (the first is initial), with the config option model (small|large)")
	fs.StringVar(&cfg.hangOn, "hang-on", "", "never answer requests of this method (initialize, session/new, ...)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg.authMethods = list(auth)
	cfg.commands = list(commands)
	cfg.modes = list(modes)
	cfg.mcpCaps = list(mcpCaps)
	for _, name := range cfg.mcpCaps {
		if name != "http" && name != "sse" {
			return cfg, fmt.Errorf("--mcp-capabilities: unknown transport %q (http, sse)", name)
		}
	}
	cfg.promptCaps = map[string]bool{}
	for _, name := range strings.Split(promptCaps, ",") {
		switch name = strings.TrimSpace(name); name {
		case "image", "audio", "embeddedContext":
			cfg.promptCaps[name] = true
		case "none", "":
		default:
			return cfg, fmt.Errorf("--prompt-capabilities: unknown capability %q", name)
		}
	}
	if newErr != "" {
		code, msg, ok := strings.Cut(newErr, ":")
		n, err := strconv.Atoi(code)
		if !ok || err != nil {
			return cfg, fmt.Errorf("--session-new-error wants CODE:MESSAGE, got %q", newErr)
		}
		cfg.sessionNewErr = &rpcError{Code: n, Message: msg}
	}
	return cfg, nil
}

// list splits a comma-separated flag value, dropping empty items.
func list(value string) []string {
	var out []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == unmountInNamespace {
		unmountHere()
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "testagent:", err)
		os.Exit(2)
	}
	if cfg.countStarts != "" {
		appendLine(cfg.countStarts, "start")
	}
	a := newAgent(cfg, os.Stdout)
	if cfg.strayStartup {
		a.out.writeRaw([]byte("starting up..."))
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		a.waitIfStalled()
		if len(bytes.TrimSpace(line)) > 0 {
			a.handleLine(line)
		}
		if err != nil {
			// EOF (or a broken stdin): the client is gone, and so are we,
			// whatever scripts are still running or sleeping.
			os.Exit(0)
		}
	}
}
