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

import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

import {
  call,
  connect,
  eventArm,
  harnessErrorFromStatus,
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
};

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

function normalise(key, value) {
  if (Array.isArray(value)) return value.map((v) => normalise(key, v));
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalise(k, v)]));
  }
  if (typeof value === "string") {
    if (key in PLACEHOLDERS && value !== "") return PLACEHOLDERS[key];
    return value.replace(SESSION_ID_PATTERN, "<session>");
  }
  return value;
}

function finish(out) {
  return canonical(Object.fromEntries(Object.entries(out).map(([k, v]) => [k, k === "name" ? v : normalise(k, v)])));
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

async function runScenario(gateway, sc) {
  const out = { name: sc.name, arms: [] };
  const req = { text: sc.script.join("\n"), omit_outcome_text: sc.omit_outcome_text ?? false };
  let sessionId = null;
  if (sc.session) {
    try {
      const session = await call(gateway, "CreateSession", { agent: sc.agent }, { deadline: deadline() });
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
        line = await runScenario(gateway, sc);
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
