#!/usr/bin/python3
"""The Python runner of acpgate's cross-language conformance suite.

Runs every scenario of conformance/scenarios.json against one running gateway
and prints one canonical JSON line per scenario, exactly as the Go and Node
runners do; conformance/run.sh checks that the three outputs are
byte-identical to each other and to conformance/expected.jsonl. The output
format and its normalisation are defined in conformance/README.md.

    PYTHONPATH=clients/python /usr/bin/python3 conformance/python/run.py --addr HOST:PORT

Options: --scenarios FILE (default: scenarios.json beside this directory),
--only NAME (one scenario), --expected (print the expected lines the
scenarios file declares instead of running anything). The address defaults
to $ACPGATE_ADDR. Exit status: 0 when every scenario could be run (whatever
its outcome), 1 when not, 2 on a usage error.

Runs on Debian's python3-grpcio and python3-protobuf (system /usr/bin/python3).
"""

import argparse
import json
import os
import re
import secrets
import sys

import grpc
from google.protobuf import json_format

from acpgate.client import event_arm, harness_error_from_rpc_error
from acpgate.v1 import events_pb2, gateway_pb2, gateway_pb2_grpc

SCENARIO_TIMEOUT = 60.0  # seconds; a stream that never ends fails the suite

TERMINAL_ARMS = ("outcome", "error")

SESSION_ID_PATTERN = re.compile(r"sess-[0-9]+-[0-9]+")

PLACEHOLDERS = {
    "sessionId": "<session>",
    "turnId": "<turn>",
    "stderrTail": "<stderr-tail>",
    "time": "<time>",
    "startedAt": "<time>",
    "endedAt": "<time>",
}

# Makes this run's request ids its own: every runner prompts the same
# gateway, and a request_id seen before would attach to the earlier runner's
# turn. It is removed from every string of the output.
RUN_SUFFIX = "." + secrets.token_hex(8)


def canonical(value):
    """Canonical JSON: sorted keys, no whitespace, raw UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalise(key, value, turns):
    """turns: (turn id, placeholder) pairs a steps scenario's streams
    announced, in order."""
    if isinstance(value, dict):
        return {k: normalise(k, v, turns) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(key, v, turns) for v in value]
    if isinstance(value, str):
        for turn_id, placeholder in turns:
            if key == "turnId" and value == turn_id:
                return placeholder
        if key in PLACEHOLDERS and value != "":
            return PLACEHOLDERS[key]
        for turn_id, placeholder in turns:
            value = value.replace(turn_id, placeholder)
        value = value.replace(RUN_SUFFIX, "")
        return SESSION_ID_PATTERN.sub("<session>", value)
    return value


def finish(out, turns=()):
    return canonical({k: (v if k == "name" else normalise(k, v, turns)) for k, v in out.items()})


def proto_json(message):
    """protojson: lowerCamelCase names, defaults omitted, enums by name,
    64-bit integers as strings."""
    return json_format.MessageToDict(message)


def status_object(call, err):
    if not isinstance(err, grpc.Call):
        raise RuntimeError(f"{call} failed without a gRPC status: {err!r}")
    obj = {"call": call, "code": err.code().name, "message": err.details() or ""}
    harness_error = harness_error_from_rpc_error(err)
    if harness_error is not None:
        obj["error"] = proto_json(harness_error)
    return obj


def violations(events, agent, session_id):
    """The stream invariants of PromptEvent (see conformance/README.md)."""
    found = []
    if not events:
        return found
    for i, ev in enumerate(events, start=1):
        if ev.seq != i:
            found.append(f"event {i} has seq {ev.seq}")
        if not ev.HasField("time"):
            found.append(f"event {i} has no time")
        if event_arm(ev) is None:
            found.append(f"event {i} has no arm")
        if event_arm(ev) in TERMINAL_ARMS and i != len(events):
            found.append(f"event {i} is terminal but not last")
    started = events[0].started
    if event_arm(events[0]) != "started":
        found.append("the first event is not started")
    else:
        if started.agent != agent:
            found.append("started.agent is not the agent prompted")
        if session_id and started.session_id != session_id:
            found.append("started.session_id is not the session prompted")
    last = events[-1]
    if event_arm(last) not in TERMINAL_ARMS:
        found.append("the last event is not terminal")
    if event_arm(last) == "outcome":
        if last.outcome.turn_id != started.turn_id:
            found.append("outcome.turn_id is not started.turn_id")
        if last.outcome.session_id != started.session_id:
            found.append("outcome.session_id is not started.session_id")
    return found


def chunk_delivery(sc):
    """The scenario's chunk_delivery, by its enum name, for every Prompt of
    the scenario; absent, the gateway's default (as the Go runner)."""
    name = sc.get("chunk_delivery", "")
    if not name:
        return gateway_pb2.CHUNK_DELIVERY_UNSPECIFIED
    if name not in gateway_pb2.ChunkDelivery.keys():
        raise ValueError(f"chunk_delivery {name!r} is not a ChunkDelivery name")
    return gateway_pb2.ChunkDelivery.Value(name)


def run_scenario(gateway, sc):
    out = {"name": sc["name"], "arms": []}
    req = gateway_pb2.PromptRequest(text="\n".join(sc["script"]),
                                    omit_outcome_text=sc.get("omit_outcome_text", False),
                                    chunk_delivery=chunk_delivery(sc))
    if sc.get("prompt_image"):
        im = sc["prompt_image"]
        req.prompt.append(events_pb2.ContentBlock(image=events_pb2.ImageContent(data=im["data"], mime_type=im["mime_type"])))
    session_id = None
    if sc.get("session"):
        try:
            create = sc.get("create_session") or {}
            session = gateway.CreateSession(
                gateway_pb2.CreateSessionRequest(agent=sc["agent"], mode_id=create.get("mode_id", ""),
                                                 config_options=create.get("config_options", {})),
                timeout=SCENARIO_TIMEOUT)
        except grpc.RpcError as err:
            out["status"] = status_object("CreateSession", err)
            return finish(out)
        session_id = session.id
        req.session_id = session_id
    else:
        req.agent = sc["agent"]

    try:
        arms, events = [], []
        started_session = ""
        cancel_sent = False
        try:
            for ev in gateway.Prompt(req, timeout=SCENARIO_TIMEOUT):
                events.append(ev)
                arm = event_arm(ev) or ""
                arms.append(arm)
                if arm == "started":
                    started_session = ev.started.session_id
                if sc.get("cancel_after_first_chunk") and not cancel_sent and arm == "agent_message_chunk":
                    cancel_sent = True
                    try:
                        resp = gateway.Cancel(gateway_pb2.CancelRequest(session_id=started_session),
                                              timeout=SCENARIO_TIMEOUT)
                        out["cancel"] = {"cancelled": resp.cancelled}
                    except grpc.RpcError as err:
                        out["cancel"] = status_object("Cancel", err)
        except grpc.RpcError as err:
            out["status"] = status_object("Prompt", err)
        out["arms"] = arms
        found = violations(events, sc["agent"], session_id)
        if found:
            out["violations"] = found
        if events and event_arm(events[-1]) in TERMINAL_ARMS:
            terminal = events_pb2.PromptEvent()
            terminal.CopyFrom(events[-1])
            terminal.ClearField("seq")  # volatile
            terminal.ClearField("time")
            out["terminal"] = proto_json(terminal)
        return finish(out)
    finally:
        if session_id is not None:
            # The gateway has already dropped a session whose agent is gone;
            # NOT_FOUND is fine then.
            try:
                gateway.CloseSession(gateway_pb2.CloseSessionRequest(session_id=session_id), timeout=10)
            except grpc.RpcError:
                pass


def run_steps(gateway, sc):
    """A scenario of kind "steps": one call per step (see
    conformance/README.md)."""
    outs, results, turns = [], [], []
    for i, st in enumerate(sc["steps"]):
        out = {"call": st["call"]}
        try:
            if st["call"] == "Prompt":
                res = prompt_step(gateway, sc, st, results, out)
            elif st["call"] == "WatchTurn":
                res = watch_step(gateway, st, results, out)
            elif st["call"] == "GetTurn":
                res = get_turn_step(gateway, st, results, out)
            else:
                raise ValueError(f"unknown call {st['call']!r}")
        except Exception as exc:
            raise RuntimeError(f"step {i}: {exc}") from exc
        if res["turn_id"] and all(res["turn_id"] != t for t, _ in turns):
            turns.append((res["turn_id"], f"<turn:{i}>"))
        results.append(res)
        outs.append(out)
    return finish({"name": sc["name"], "steps": outs}, turns)


def prompt_step(gateway, sc, st, results, out):
    agent = st.get("agent") or sc.get("agent", "")
    req = gateway_pb2.PromptRequest(agent=agent, text="\n".join(st.get("script", [])),
                                    chunk_delivery=chunk_delivery(sc))
    if st.get("request_id"):
        req.request_id = st["request_id"] + RUN_SUFFIX
    res = read_stream("Prompt", gateway.Prompt(req, timeout=SCENARIO_TIMEOUT), out)
    same_events(violations(res["events"], agent, None), st, 0, res["events"], results, out)
    return res


def watch_step(gateway, st, results, out):
    after_seq = st.get("after_seq", 0)
    req = gateway_pb2.WatchTurnRequest(turn_id=step_turn(st, results), after_seq=after_seq)
    res = read_stream("WatchTurn", gateway.WatchTurn(req, timeout=SCENARIO_TIMEOUT), out)
    same_events([], st, after_seq, res["events"], results, out)
    return res


def get_turn_step(gateway, st, results, out):
    res = {"events": [], "turn_id": ""}
    try:
        turn = gateway.GetTurn(gateway_pb2.GetTurnRequest(turn_id=step_turn(st, results)),
                               timeout=SCENARIO_TIMEOUT)
    except grpc.RpcError as err:
        out["status"] = status_object("GetTurn", err)
        return res
    out["turn"] = proto_json(turn)
    if "same_as" in st:
        ref = step_ref(st["same_as"], results)["events"]
        if not ref or not turn.HasField("terminal") or turn.terminal != ref[-1]:
            out["violations"] = [f"the terminal differs from step {st['same_as']}'s last event"]
    return res


def read_stream(call, stream, out):
    """Reads a Prompt or WatchTurn stream to its end: its events
    (heartbeats left out) and a non-OK status go to out."""
    res = {"events": [], "turn_id": ""}
    try:
        for ev in stream:
            arm = event_arm(ev)
            if arm == "heartbeat":
                continue
            if arm == "started" and not res["turn_id"]:
                res["turn_id"] = ev.started.turn_id
            res["events"].append(ev)
    except grpc.RpcError as err:
        out["status"] = status_object(call, err)
    out["events"] = [proto_json(ev) for ev in res["events"]]
    return res


def same_events(found, st, after_seq, events, results, out):
    """Adds to the violations found the difference, when there is one,
    between events and the events of step same_as with seq > after_seq
    (field for field, seq and time included), and records them in out."""
    if "same_as" in st:
        want = [ev for ev in step_ref(st["same_as"], results)["events"] if ev.seq > after_seq]
        if want != events:
            found.append(f"the events differ from step {st['same_as']}'s after seq {after_seq}")
    if found:
        out["violations"] = found


def step_turn(st, results):
    """The turn a WatchTurn or GetTurn step names: turn_id, or the turn the
    stream of step `turn` announced."""
    if "turn" not in st:
        return st.get("turn_id", "")
    turn_id = step_ref(st["turn"], results)["turn_id"]
    if not turn_id:
        raise ValueError(f"step {st['turn']} announced no turn")
    return turn_id


def step_ref(i, results):
    if not isinstance(i, int) or isinstance(i, bool) or not 0 <= i < len(results):
        raise ValueError(f"no earlier step {i}")
    return results[i]


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description="acpgate conformance runner (Python)")
    parser.add_argument("--addr", default=os.environ.get("ACPGATE_ADDR", ""),
                        help="gateway address HOST:PORT (default $ACPGATE_ADDR)")
    parser.add_argument("--scenarios", default=os.path.join(here, "..", "scenarios.json"))
    parser.add_argument("--only", default="", help="run only the scenario with this name")
    parser.add_argument("--expected", action="store_true",
                        help="print the expected lines declared in the scenarios file and exit")
    args = parser.parse_args(argv)

    with open(args.scenarios, encoding="utf-8") as f:
        scenarios = json.load(f)["scenarios"]
    for sc in scenarios:
        # As the Go runner's decoder: a present key must be a JSON boolean.
        if not isinstance(sc.get("omit_outcome_text", False), bool):
            print(f"run.py: scenario {sc['name']}: omit_outcome_text is not a boolean", file=sys.stderr)
            return 1
    scenarios = [sc for sc in scenarios if not args.only or sc["name"] == args.only]
    if not scenarios:
        print("run.py: no scenario to run", file=sys.stderr)
        return 1
    stdout = sys.stdout.buffer

    if args.expected:
        for sc in scenarios:
            if "expect" not in sc:
                print(f"run.py: scenario {sc['name']} has no expect", file=sys.stderr)
                return 1
            stdout.write((canonical(dict(sc["expect"], name=sc["name"])) + "\n").encode("utf-8"))
        return 0

    if not args.addr:
        parser.print_usage(sys.stderr)
        return 2
    with grpc.insecure_channel(args.addr) as channel:
        gateway = gateway_pb2_grpc.AgentGatewayStub(channel)
        for sc in scenarios:
            try:
                kind = sc.get("kind", "prompt")
                if kind == "prompt":
                    line = run_scenario(gateway, sc)
                elif kind == "steps":
                    line = run_steps(gateway, sc)
                else:
                    raise ValueError(f"unknown kind {kind!r}")
            except Exception as exc:  # report which scenario could not run
                print(f"run.py: scenario {sc['name']}: {exc}", file=sys.stderr)
                return 1
            stdout.write((line + "\n").encode("utf-8"))
            stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
