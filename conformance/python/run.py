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
}


def canonical(value):
    """Canonical JSON: sorted keys, no whitespace, raw UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalise(key, value):
    if isinstance(value, dict):
        return {k: normalise(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(key, v) for v in value]
    if isinstance(value, str):
        if key in PLACEHOLDERS and value != "":
            return PLACEHOLDERS[key]
        return SESSION_ID_PATTERN.sub("<session>", value)
    return value


def finish(out):
    return canonical({k: (v if k == "name" else normalise(k, v)) for k, v in out.items()})


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


def run_scenario(gateway, sc):
    out = {"name": sc["name"], "arms": []}
    req = gateway_pb2.PromptRequest(text="\n".join(sc["script"]),
                                    omit_outcome_text=sc.get("omit_outcome_text", False))
    session_id = None
    if sc.get("session"):
        try:
            session = gateway.CreateSession(
                gateway_pb2.CreateSessionRequest(agent=sc["agent"]), timeout=SCENARIO_TIMEOUT)
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
                line = run_scenario(gateway, sc)
            except Exception as exc:  # report which scenario could not run
                print(f"run.py: scenario {sc['name']}: {exc}", file=sys.stderr)
                return 1
            stdout.write((line + "\n").encode("utf-8"))
            stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
