// A small ACP agent built on the official TypeScript SDK
// (@agentclientprotocol/sdk, pinned in package.json). acp/interop_test.go
// runs it to check the gateway's ACP client against an implementation the
// gateway's authors did not write.
//
// SDK 2.x removed AgentSideConnection; its replacement is the app API:
// agent().onRequest(...).onNotification(...).connect(ndJsonStream(...)).
//
// What it does is keyed on the prompt's text (its text blocks, joined):
//
//   multi          two messages (messageId "m1" and "m2"), each streamed in
//                  several chunks, then end_turn
//   tools          a tool_call and its completing tool_call_update, no text,
//                  then end_turn
//   refuse         one chunk, then refusal
//   truncate       one chunk, then max_tokens
//   wait           one chunk, then waits for session/cancel, then cancelled
//   permission     session/request_permission (allow_once / reject_once),
//                  then a chunk "selected:<optionId>" or "cancelled", then
//                  end_turn
//   read <path>    fs/read_text_file, then a chunk "read:<content>" or
//                  "read-error:<message>", then end_turn
//   settings       a chunk "mode:<id> model:<value>" with the session's
//                  current mode and model, then end_turn
//   switch         current_mode_update to "code" and a config_option_update
//                  setting model to "large", then end_turn
//   mcp            a chunk listing the mcpServers session/new received,
//                  "mcp:<name>/<type or stdio>/<url or command>,..." with
//                  each header as "+<name>=<value>", then end_turn
//   usage          a usage_update (used 1200 of 200000, cost 0.25 USD),
//                  then end_turn
//   elicit         elicitation/create (form: a required string "name"),
//                  then a chunk "elicited:<action>[:<name>]", then end_turn
//   anything else  a chunk "echo:<text>", then end_turn
//
// Sessions advertise the modes "ask" (initial) and "code" and a select
// config option "model" ("small", initial, or "large"), served by
// session/set_mode and session/set_config_option. session/list lists the
// process's sessions, one per page (in directory "/hang" it answers only
// when the client withdraws it with $/cancel_request, which the SDK turns
// into an abort); session/close forgets one.
//
// Diagnostics go to stderr; stdout carries only the protocol.

import { randomUUID } from "node:crypto";
import { Readable, Writable } from "node:stream";

import * as acp from "@agentclientprotocol/sdk";

const AGENT_NAME = "acpgate-interop-tsagent";
const AGENT_VERSION = "1.0.0";

// The texts the multi-message turn streams, chunk by chunk. The Go test
// knows them too.
const MULTI = {
  m1: ["First message, ", "streamed in ", "three chunks."],
  m2: ["Second message, ", "in two chunks."],
};

const log = (...args) => console.error(`[${AGENT_NAME}]`, ...args);

let clientCapabilities = {};

// sessionId -> { cwd, mode, model, mcpServers, turn: { cancelled: Promise<void>, cancel: () => void } | null }
const sessions = new Map();

const MODES = [
  { id: "ask", name: "Ask", description: "answers questions" },
  { id: "code", name: "Code", description: "writes code" },
];
const MODELS = ["small", "large"];

function configOptions(session) {
  return [
    {
      id: "model",
      name: "Model",
      category: "model",
      type: "select",
      currentValue: session.model,
      options: MODELS.map((value) => ({ value, name: value[0].toUpperCase() + value.slice(1) })),
    },
  ];
}

function describeMCP(servers) {
  return servers
    .map((s) => {
      const kind = s.type ?? "stdio";
      const where = s.url ?? s.command;
      const headers = (s.headers ?? []).map((h) => `+${h.name}=${h.value}`).join("");
      return `${s.name}/${kind}/${where}${headers}`;
    })
    .join(",");
}

function promptText(prompt) {
  return prompt
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join("")
    .trim();
}

function newTurn() {
  let cancel;
  const cancelled = new Promise((resolve) => {
    cancel = resolve;
  });
  return { cancelled, cancel, isCancelled: false };
}

async function update(client, sessionId, u) {
  await client.notify(acp.methods.client.session.update, { sessionId, update: u });
}

function textChunk(text, messageId) {
  const u = { sessionUpdate: "agent_message_chunk", content: { type: "text", text } };
  if (messageId !== undefined) {
    u.messageId = messageId;
  }
  return u;
}

async function say(client, sessionId, text, messageId) {
  await update(client, sessionId, textChunk(text, messageId));
}

async function runTurn(text, sessionId, client, turn, signal) {
  if (text === "multi") {
    for (const [messageId, chunks] of Object.entries(MULTI)) {
      for (const chunk of chunks) {
        await say(client, sessionId, chunk, messageId);
      }
    }
    return "end_turn";
  }

  if (text === "tools") {
    await update(client, sessionId, {
      sessionUpdate: "tool_call",
      toolCallId: "call-1",
      title: "List the working directory",
      kind: "read",
      status: "in_progress",
      rawInput: { path: "." },
    });
    await update(client, sessionId, {
      sessionUpdate: "tool_call_update",
      toolCallId: "call-1",
      status: "completed",
      content: [{ type: "content", content: { type: "text", text: "2 files" } }],
      rawOutput: { files: 2 },
    });
    return "end_turn";
  }

  if (text === "refuse") {
    await say(client, sessionId, "I will not do that.");
    return "refusal";
  }

  if (text === "truncate") {
    await say(client, sessionId, "This answer is cut sho");
    return "max_tokens";
  }

  if (text === "wait") {
    await say(client, sessionId, "Working on it...");
    // Until session/cancel arrives, or the connection goes away.
    await Promise.race([
      turn.cancelled,
      new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true })),
    ]);
    return "cancelled";
  }

  if (text === "permission") {
    const response = await client.request(acp.methods.client.session.requestPermission, {
      sessionId,
      toolCall: {
        toolCallId: "call-perm",
        title: "Write notes.txt",
        kind: "edit",
        status: "pending",
      },
      options: [
        { optionId: "allow", name: "Allow once", kind: "allow_once" },
        { optionId: "reject", name: "Reject once", kind: "reject_once" },
      ],
    });
    const outcome = response.outcome;
    const said = outcome.outcome === "selected" ? `selected:${outcome.optionId}` : "cancelled";
    await say(client, sessionId, said);
    // ACP: an agent whose turn was cancelled answers cancelled.
    return turn.isCancelled ? "cancelled" : "end_turn";
  }

  if (text === "settings") {
    const session = sessions.get(sessionId);
    await say(client, sessionId, `mode:${session.mode} model:${session.model}`);
    return "end_turn";
  }

  if (text === "switch") {
    const session = sessions.get(sessionId);
    session.mode = "code";
    await update(client, sessionId, { sessionUpdate: "current_mode_update", currentModeId: "code" });
    session.model = "large";
    await update(client, sessionId, { sessionUpdate: "config_option_update", configOptions: configOptions(session) });
    return "end_turn";
  }

  if (text === "mcp") {
    await say(client, sessionId, `mcp:${describeMCP(sessions.get(sessionId).mcpServers)}`);
    return "end_turn";
  }

  if (text === "usage") {
    await update(client, sessionId, {
      sessionUpdate: "usage_update",
      used: 1200,
      size: 200000,
      cost: { amount: 0.25, currency: "USD" },
    });
    return "end_turn";
  }

  if (text === "elicit") {
    const response = await client.request(acp.methods.client.elicitation.create, {
      sessionId,
      mode: "form",
      message: "Who is asking?",
      requestedSchema: {
        type: "object",
        properties: { name: { type: "string", title: "Name" } },
        required: ["name"],
      },
    });
    const said = response.action === "accept" ? `elicited:accept:${response.content?.name}` : `elicited:${response.action}`;
    await say(client, sessionId, said);
    return "end_turn";
  }

  if (text.startsWith("read ")) {
    const path = text.slice("read ".length).trim();
    if (!clientCapabilities?.fs?.readTextFile) {
      await say(client, sessionId, "read-error:the client did not advertise fs.readTextFile");
      return "end_turn";
    }
    let said;
    try {
      const { content } = await client.request(acp.methods.client.fs.readTextFile, { sessionId, path });
      said = `read:${content}`;
    } catch (err) {
      said = `read-error:${err?.message ?? String(err)}`;
    }
    await say(client, sessionId, said);
    return "end_turn";
  }

  await say(client, sessionId, `echo:${text}`);
  return "end_turn";
}

const app = acp
  .agent({ name: AGENT_NAME })
  .onRequest(acp.methods.agent.initialize, ({ params }) => {
    clientCapabilities = params.clientCapabilities ?? {};
    log("initialize", JSON.stringify(params));
    return {
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: false,
        mcpCapabilities: { http: true, sse: false },
        sessionCapabilities: { list: {}, close: {} },
      },
      authMethods: [],
      agentInfo: { name: AGENT_NAME, version: AGENT_VERSION },
    };
  })
  .onRequest(acp.methods.agent.session.new, ({ params }) => {
    const sessionId = `ts-${randomUUID()}`;
    const session = { cwd: params.cwd, mode: "ask", model: "small", mcpServers: params.mcpServers, turn: null };
    sessions.set(sessionId, session);
    log("session/new", sessionId, params.cwd);
    return {
      sessionId,
      modes: { availableModes: MODES, currentModeId: session.mode },
      configOptions: configOptions(session),
    };
  })
  .onRequest(acp.methods.agent.session.setMode, ({ params }) => {
    const session = sessions.get(params.sessionId);
    if (!session || !MODES.some((m) => m.id === params.modeId)) {
      throw acp.RequestError.invalidParams(undefined, `unknown session or mode ${params.modeId}`);
    }
    session.mode = params.modeId;
    return {};
  })
  .onRequest(acp.methods.agent.session.setConfigOption, ({ params }) => {
    const session = sessions.get(params.sessionId);
    if (!session || params.configId !== "model" || !MODELS.includes(params.value)) {
      throw acp.RequestError.invalidParams(undefined, `unknown session, option or value ${params.value}`);
    }
    session.model = params.value;
    return { configOptions: configOptions(session) };
  })
  .onRequest(acp.methods.agent.session.list, async ({ params, signal }) => {
    if (params.cwd === "/hang") {
      // Never answered until the client withdraws the request.
      log("session/list waiting");
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      log("session/list withdrawn");
      throw signal.reason;
    }
    // One session per page: the cursor is the index of the next one.
    const all = [...sessions.entries()].filter(([, s]) => !params.cwd || s.cwd === params.cwd);
    const at = params.cursor ? Number(params.cursor) : 0;
    const page = all.slice(at, at + 1).map(([sessionId, s]) => ({ sessionId, cwd: s.cwd, title: `session in ${s.mode} mode` }));
    const next = at + 1 < all.length ? String(at + 1) : undefined;
    return next === undefined ? { sessions: page } : { sessions: page, nextCursor: next };
  })
  .onRequest(acp.methods.agent.session.close, ({ params }) => {
    log("session/close", params.sessionId);
    sessions.delete(params.sessionId);
    return {};
  })
  .onRequest(acp.methods.agent.session.prompt, async ({ params, client, signal }) => {
    const session = sessions.get(params.sessionId);
    if (!session) {
      throw acp.RequestError.invalidParams(undefined, `unknown session ${params.sessionId}`);
    }
    if (session.turn) {
      throw acp.RequestError.invalidRequest(undefined, "a turn is already running");
    }
    const turn = newTurn();
    session.turn = turn;
    const text = promptText(params.prompt);
    log("session/prompt", JSON.stringify(text));
    try {
      const stopReason = await runTurn(text, params.sessionId, client, turn, signal);
      log("turn ended", stopReason);
      return { stopReason };
    } finally {
      session.turn = null;
    }
  })
  .onNotification(acp.methods.agent.session.cancel, ({ params }) => {
    log("session/cancel", params.sessionId);
    const turn = sessions.get(params.sessionId)?.turn;
    if (turn) {
      turn.isCancelled = true;
      turn.cancel();
    }
  });

const connection = app.connect(
  acp.ndJsonStream(Writable.toWeb(process.stdout), Readable.toWeb(process.stdin)),
);

connection.closed.then(
  () => {
    log("connection closed");
    process.exit(0);
  },
  (err) => {
    log("connection failed", err);
    process.exit(1);
  },
);
