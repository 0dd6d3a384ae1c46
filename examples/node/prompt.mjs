// Stream one prompt turn from acpgate, print the answer as it arrives, and
// branch on how the turn ended.
//
//   go run ./cmd/acpgate serve &                              # the gateway, on the demo agent
//   (cd clients/node && npm ci)                               # once: the client's dependencies
//   node examples/node/prompt.mjs "tell me about acpgate"
//   node examples/node/prompt.mjs --agent demo refuse
//
// Try the demo agent's keywords: refuse, truncate, loop, fail, tools, slow.
// Ctrl-C during a turn asks the gateway to cancel it (the Cancel call) and
// waits for the cancellation to arrive as the turn's terminal event.

import { parseArgs } from "node:util";

// In your own project, import from wherever you keep acpgate's Node client.
import { call, connect, errorClass, eventArm, harnessErrorFromStatus, statusName } from "../../clients/node/index.mjs";

// reportError reports a turn that did not complete and returns the exit
// status (the same codes as `acpgate prompt`).
function reportError(error) {
  console.error(`error: ${error.message}`);
  if (error.partial) console.error(`(the agent had said ${error.partial.total_bytes ?? 0} bytes before the turn ended)`);
  switch (errorClass(error)) {
    case "transport": {
      const t = error.transport;
      console.error(`the channel to the agent broke: ${t.reason}`);
      if (t.exit_code !== undefined) console.error(`the agent exited with status ${t.exit_code}`);
      if (t.stderr_tail) console.error(`the agent's stderr ended with:\n${t.stderr_tail}`);
      return 3;
    }
    case "protocol":
      console.error("the agent broke the ACP wire contract");
      return 4;
    case "harness": {
      const h = error.harness;
      if (h.cancelled) {
        console.error("the turn was cancelled");
        return 7;
      }
      if (h.auth_required) {
        console.error("the agent needs credentials configured for the gateway");
        return 8;
      }
      if (h.rpc_code !== undefined) console.error(`the agent failed with JSON-RPC error ${h.rpc_code}`);
      else console.error(`the agent stopped short: ${h.stop_kind}`);
      return 5;
    }
    case "policy_refused":
      console.error("the agent refused the prompt");
      return 6;
    case "capability_not_supported":
      console.error(`the agent does not support ${error.capability_not_supported.primitive}`);
      return 9;
    case "stale_target":
      return 10;
    case "gateway":
      console.error("the gateway itself failed the turn; running it again may succeed");
      return 11;
    default:
      return 5; // a class this example does not know yet
  }
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      addr: { type: "string", default: process.env.ACPGATE_ADDR || "127.0.0.1:7070" },
      agent: { type: "string", default: "demo" },
    },
  });
  const text = positionals.join(" ") || "Hello from the Node example";
  const gateway = connect(values.addr);
  const stream = gateway.Prompt({ agent: values.agent, text });

  let sessionId = "";
  let interrupted = false;
  process.on("SIGINT", () => {
    if (!sessionId || interrupted) {
      stream.cancel(); // no turn yet, or a second Ctrl-C: give up
      return;
    }
    interrupted = true;
    console.error("\n[cancelling the turn]");
    call(gateway, "Cancel", { session_id: sessionId }, { deadline: new Date(Date.now() + 5000) }).catch(() => stream.cancel());
  });

  let lastMessage = null;
  let printed = false;
  try {
    for await (const ev of stream) {
      switch (eventArm(ev)) {
        case "started":
          sessionId = ev.started.session_id ?? "";
          console.error(`[${ev.started.agent}: turn ${ev.started.turn_id} on session ${sessionId}]`);
          break;
        case "agent_message_chunk": {
          const chunk = ev.agent_message_chunk;
          const id = chunk.message_id ?? "";
          // A new message id starts a new message: separate them as the
          // outcome's text does, with a blank line.
          if (printed && id !== lastMessage) process.stdout.write("\n\n");
          lastMessage = id;
          process.stdout.write(chunk.text ?? "");
          printed ||= Boolean(chunk.text);
          break;
        }
        case "tool_call":
          console.error(`[tool: ${ev.tool_call.title ?? ""}]`);
          break;
        case "outcome":
          if (printed) process.stdout.write("\n");
          if (!ev.outcome.text) console.error("[completed without text: a turn of tool calls only]");
          return 0;
        case "error":
          if (printed) process.stdout.write("\n");
          return reportError(ev.error);
      }
    }
  } catch (err) {
    // A non-OK status: the gateway rejected the call and no turn ran.
    console.error(`prompt: the gateway rejected the call: ${statusName(err.code)}: ${err.details}`);
    const detail = harnessErrorFromStatus(err);
    if (detail) reportError(detail);
    return 1;
  } finally {
    gateway.close();
  }
  console.error("prompt: the stream ended without a terminal event");
  return 1;
}

process.exitCode = await main();
