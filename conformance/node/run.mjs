// The Node runner of acpgate's cross-language conformance suite.
//
// Runs every scenario of conformance/scenarios.json against one running
// gateway and prints one canonical JSON line per scenario, exactly as the Go
// and Python runners do; conformance/run.sh checks that the three outputs are
// byte-identical to each other and to conformance/expected.jsonl. The output
// format and its normalisation are defined in conformance/README.md.
//
//   node conformance/node/run.mjs --addr HOST:PORT [--scenarios FILE] [--only NAME]
//
// The address defaults to $ACPGATE_ADDR. It uses the client in clients/node
// (run `npm ci` there first). Exit status: 0 when every scenario could be run
// (whatever its outcome), 1 when not, 2 on a usage error.

import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import {
  call,
  connect,
  eventArm,
  harnessErrorFromStatus,
  packageDefinition,
  statusName,
  toProtoJSON,
  TERMINAL_ARMS,
} from "../../clients/node/index.mjs";

const SCENARIO_TIMEOUT_MS = 60_000; // a stream that never ends fails the suite

const SESSION_ID_PATTERN = /sess-[0-9]+-[0-9]+/g;

const PLACEHOLDERS = {
  sessionId: "<session>",
  turnId: "<turn>",
  stderrTail: "<stderr-tail>",
  time: "<time>",
  startedAt: "<time>",
  endedAt: "<time>",
};

// Makes this run's request ids its own: every runner prompts the same
// gateway, and a request_id seen before would attach to the earlier runner's
// turn. It is removed from every string of the output.
const RUN_SUFFIX = "." + randomBytes(8).toString("hex");

// canonical renders JSON with keys sorted by code point, no whitespace and
// strings as raw UTF-8 (JSON.stringify escapes exactly ", \ and control
// characters, as Python's json.dumps(ensure_ascii=False) does).
function canonical(value) {
  if (value === null) return "null";
  switch (typeof value) {
    case "boolean":
      return String(value);
    case "number":
      if (!Number.isInteger(value)) throw new Error(`canonical JSON: non-integer number ${value}`);
      return String(value);
    case "string":
      return JSON.stringify(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  const keys = Object.keys(value).sort(byCodePoint);
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
}

function byCodePoint(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}

// turns: the [turn id, placeholder] pairs a steps scenario's streams
// announced, in order.
function normalise(key, value, turns) {
  if (Array.isArray(value)) return value.map((v) => normalise(key, v, turns));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(k, v, turns)]));
  }
  if (typeof value === "string") {
    for (const [turnId, placeholder] of turns) {
      if (key === "turnId" && value === turnId) return placeholder;
    }
    if (key in PLACEHOLDERS && value !== "") return PLACEHOLDERS[key];
    for (const [turnId, placeholder] of turns) value = value.replaceAll(turnId, placeholder);
    value = value.replaceAll(RUN_SUFFIX, "");
    return value.replace(SESSION_ID_PATTERN, "<session>");
  }
  return value;
}

function finish(out, turns = []) {
  return canonical(
    Object.fromEntries(Object.entries(out).map(([k, v]) => [k, k === "name" ? v : normalise(k, v, turns)])),
  );
}

function statusObject(callName, err) {
  if (typeof err?.code !== "number") throw new Error(`${callName} failed without a gRPC status: ${err}`);
  const obj = { call: callName, code: statusName(err.code), message: err.details ?? "" };
  const harnessError = harnessErrorFromStatus(err);
  if (harnessError) obj.error = toProtoJSON("acpgate.v1.HarnessError", harnessError);
  return obj;
}

function isTerminal(arm) {
  return TERMINAL_ARMS.includes(arm);
}

// violations checks the stream invariants of PromptEvent (see
// conformance/README.md).
function violations(events, agent, sessionId) {
  const found = [];
  if (events.length === 0) return found;
  events.forEach((ev, idx) => {
    const i = idx + 1;
    if (String(ev.seq ?? "0") !== String(i)) found.push(`event ${i} has seq ${ev.seq ?? "0"}`);
    if (!ev.time) found.push(`event ${i} has no time`);
    if (!eventArm(ev)) found.push(`event ${i} has no arm`);
    if (isTerminal(eventArm(ev)) && i !== events.length) found.push(`event ${i} is terminal but not last`);
  });
  const started = eventArm(events[0]) === "started" ? events[0].started : {};
  if (eventArm(events[0]) !== "started") {
    found.push("the first event is not started");
  } else {
    if ((started.agent ?? "") !== agent) found.push("started.agent is not the agent prompted");
    if (sessionId && (started.session_id ?? "") !== sessionId) found.push("started.session_id is not the session prompted");
  }
  const last = events[events.length - 1];
  if (!isTerminal(eventArm(last))) found.push("the last event is not terminal");
  if (eventArm(last) === "outcome") {
    if ((last.outcome.turn_id ?? "") !== (started.turn_id ?? "")) found.push("outcome.turn_id is not started.turn_id");
    if ((last.outcome.session_id ?? "") !== (started.session_id ?? "")) {
      found.push("outcome.session_id is not started.session_id");
    }
  }
  return found;
}

function deadline() {
  return new Date(Date.now() + SCENARIO_TIMEOUT_MS);
}

// The scenario's chunk_delivery, by its enum name, for every Prompt of the
// scenario; absent, the gateway's default (as the Go runner).
function chunkDelivery(sc) {
  const name = sc.chunk_delivery ?? "";
  if (name === "") return "CHUNK_DELIVERY_UNSPECIFIED";
  const names = packageDefinition["acpgate.v1.ChunkDelivery"].type.value.map((v) => v.name);
  if (!names.includes(name)) {
    throw new Error(`chunk_delivery ${JSON.stringify(name)} is not a ChunkDelivery name`);
  }
  return name;
}

async function runScenario(gateway, sc) {
  const out = { name: sc.name, arms: [] };
  const req = { text: sc.script.join("\n"), omit_outcome_text: sc.omit_outcome_text ?? false, chunk_delivery: chunkDelivery(sc) };
  if (sc.prompt_image) {
    req.prompt = [{ image: { data: sc.prompt_image.data, mime_type: sc.prompt_image.mime_type } }];
  }
  let sessionId = null;
  if (sc.session) {
    try {
      const create = { agent: sc.agent };
      if (sc.create_session) {
        create.mode_id = sc.create_session.mode_id ?? "";
        create.config_options = sc.create_session.config_options ?? {};
      }
      const session = await call(gateway, "CreateSession", create, { deadline: deadline() });
      sessionId = session.id;
      req.session_id = sessionId;
    } catch (err) {
      out.status = statusObject("CreateSession", err);
      return finish(out);
    }
  } else {
    req.agent = sc.agent;
  }

  try {
    const arms = [];
    const events = [];
    let startedSession = "";
    let cancelSent = false;
    try {
      for await (const ev of gateway.Prompt(req, { deadline: deadline() })) {
        events.push(ev);
        const arm = eventArm(ev) ?? "";
        arms.push(arm);
        if (arm === "started") startedSession = ev.started.session_id ?? "";
        if (sc.cancel_after_first_chunk && !cancelSent && arm === "agent_message_chunk") {
          cancelSent = true;
          try {
            const resp = await call(gateway, "Cancel", { session_id: startedSession }, { deadline: deadline() });
            out.cancel = { cancelled: resp.cancelled ?? false };
          } catch (err) {
            out.cancel = statusObject("Cancel", err);
          }
        }
      }
    } catch (err) {
      out.status = statusObject("Prompt", err);
    }
    out.arms = arms;
    const found = violations(events, sc.agent, sessionId);
    if (found.length > 0) out.violations = found;
    const last = events[events.length - 1];
    if (last && isTerminal(eventArm(last))) {
      const terminal = toProtoJSON("acpgate.v1.PromptEvent", last);
      delete terminal.seq; // volatile
      delete terminal.time;
      out.terminal = terminal;
    }
    return finish(out);
  } finally {
    if (sessionId !== null) {
      // The gateway has already dropped a session whose agent is gone;
      // NOT_FOUND is fine then.
      await call(gateway, "CloseSession", { session_id: sessionId }, { deadline: deadline() }).catch(() => {});
    }
  }
}

// runSteps runs a scenario of kind "steps": one call per step (see
// conformance/README.md).
async function runSteps(gateway, sc) {
  const outs = [];
  const results = [];
  const turns = [];
  for (const [i, st] of sc.steps.entries()) {
    const out = { call: st.call };
    let res;
    try {
      if (st.call === "Prompt") res = await promptStep(gateway, sc, st, results, out);
      else if (st.call === "WatchTurn") res = await watchStep(gateway, st, results, out);
      else if (st.call === "GetTurn") res = await getTurnStep(gateway, st, results, out);
      else throw new Error(`unknown call ${JSON.stringify(st.call)}`);
    } catch (err) {
      throw new Error(`step ${i}: ${err?.message ?? err}`);
    }
    if (res.turnId && !turns.some(([t]) => t === res.turnId)) turns.push([res.turnId, `<turn:${i}>`]);
    results.push(res);
    outs.push(out);
  }
  return finish({ name: sc.name, steps: outs }, turns);
}

async function promptStep(gateway, sc, st, results, out) {
  const agent = st.agent || (sc.agent ?? "");
  const req = { agent, text: (st.script ?? []).join("\n"), chunk_delivery: chunkDelivery(sc) };
  if (st.request_id) req.request_id = st.request_id + RUN_SUFFIX;
  const res = await readStream("Prompt", gateway.Prompt(req, { deadline: deadline() }), out);
  sameEvents(violations(res.events, agent, null), st, 0, res.events, results, out);
  return res;
}

async function watchStep(gateway, st, results, out) {
  const afterSeq = st.after_seq ?? 0;
  const req = { turn_id: stepTurn(st, results), after_seq: afterSeq };
  const res = await readStream("WatchTurn", gateway.WatchTurn(req, { deadline: deadline() }), out);
  sameEvents([], st, afterSeq, res.events, results, out);
  return res;
}

async function getTurnStep(gateway, st, results, out) {
  const res = { events: [], turnId: "" };
  let turn;
  try {
    turn = await call(gateway, "GetTurn", { turn_id: stepTurn(st, results) }, { deadline: deadline() });
  } catch (err) {
    out.status = statusObject("GetTurn", err);
    return res;
  }
  out.turn = toProtoJSON("acpgate.v1.Turn", turn);
  if ("same_as" in st) {
    const ref = stepRef(st.same_as, results).events;
    if (ref.length === 0 || !turn.terminal || eventKey(turn.terminal) !== eventKey(ref[ref.length - 1])) {
      out.violations = [`the terminal differs from step ${st.same_as}'s last event`];
    }
  }
  return res;
}

// readStream reads a Prompt or WatchTurn stream to its end: its events
// (heartbeats left out) and a non-OK status go to out.
async function readStream(callName, stream, out) {
  const res = { events: [], turnId: "" };
  try {
    for await (const ev of stream) {
      const arm = eventArm(ev);
      if (arm === "heartbeat") continue;
      if (arm === "started" && !res.turnId) res.turnId = ev.started.turn_id ?? "";
      res.events.push(ev);
    }
  } catch (err) {
    out.status = statusObject(callName, err);
  }
  out.events = res.events.map((ev) => toProtoJSON("acpgate.v1.PromptEvent", ev));
  return res;
}

// eventKey is an event's protojson, seq and time included, canonically: two
// events are equal field for field exactly when their keys are.
function eventKey(ev) {
  return canonical(toProtoJSON("acpgate.v1.PromptEvent", ev));
}

// sameEvents adds to the violations found the difference, when there is one,
// between events and the events of step same_as with seq > afterSeq, and
// records them in out.
function sameEvents(found, st, afterSeq, events, results, out) {
  if ("same_as" in st) {
    const want = stepRef(st.same_as, results).events.filter((ev) => BigInt(ev.seq ?? 0) > BigInt(afterSeq));
    const equal = want.length === events.length && want.every((ev, i) => eventKey(ev) === eventKey(events[i]));
    if (!equal) found.push(`the events differ from step ${st.same_as}'s after seq ${afterSeq}`);
  }
  if (found.length > 0) out.violations = found;
}

// stepTurn is the turn a WatchTurn or GetTurn step names: turn_id, or the
// turn the stream of step `turn` announced.
function stepTurn(st, results) {
  if (!("turn" in st)) return st.turn_id ?? "";
  const turnId = stepRef(st.turn, results).turnId;
  if (!turnId) throw new Error(`step ${st.turn} announced no turn`);
  return turnId;
}

function stepRef(i, results) {
  if (!Number.isInteger(i) || i < 0 || i >= results.length) throw new Error(`no earlier step ${i}`);
  return results[i];
}

async function main() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  let args;
  try {
    args = parseArgs({
      options: {
        addr: { type: "string", default: process.env.ACPGATE_ADDR ?? "" },
        scenarios: { type: "string", default: path.join(here, "..", "scenarios.json") },
        only: { type: "string", default: "" },
      },
    }).values;
  } catch (err) {
    process.stderr.write(`run.mjs: ${err.message}\n`);
    return 2;
  }
  if (!args.addr) {
    process.stderr.write("usage: run.mjs --addr HOST:PORT [--scenarios FILE] [--only NAME]\n");
    return 2;
  }
  const all = JSON.parse(readFileSync(args.scenarios, "utf8")).scenarios;
  for (const sc of all) {
    // As the Go runner's decoder: a present key must be a JSON boolean.
    if (typeof (sc.omit_outcome_text ?? false) !== "boolean") {
      process.stderr.write(`run.mjs: scenario ${sc.name}: omit_outcome_text is not a boolean\n`);
      return 1;
    }
  }
  const scenarios = all.filter((sc) => !args.only || sc.name === args.only);
  if (scenarios.length === 0) {
    process.stderr.write("run.mjs: no scenario to run\n");
    return 1;
  }
  const gateway = connect(args.addr);
  try {
    for (const sc of scenarios) {
      let line;
      try {
        const kind = sc.kind ?? "prompt";
        if (kind === "prompt") line = await runScenario(gateway, sc);
        else if (kind === "steps") line = await runSteps(gateway, sc);
        else throw new Error(`unknown kind ${JSON.stringify(kind)}`);
      } catch (err) {
        process.stderr.write(`run.mjs: scenario ${sc.name}: ${err?.stack ?? err}\n`);
        return 1;
      }
      process.stdout.write(line + "\n");
    }
  } finally {
    gateway.close();
  }
  return 0;
}

process.exitCode = await main();
