"""An example runtime speaking the JSON-lines protocol: the reference engine behind stdin/stdout.

    conformance certify --runtime "exec:python -m conformance.runtimes.example_server"

A runtime in another language implements the same loop: read a request line, reply one line.
"""

from __future__ import annotations

import itertools
import json
import sys

from ..protocol import PROTOCOL_VERSION, Refused, Unsupported, decode_request, encode_result
from .reference import ReferenceRuntime


def serve(runtime, stdin=sys.stdin, stdout=sys.stdout) -> None:
    handles: dict[str, object] = {}
    numbers = itertools.count(1)  # never reused: handles are closed while others stay open

    def dispatch(method: str, params: dict):
        if method == "hello":
            return {"protocol": PROTOCOL_VERSION}
        if method == "describe":
            return runtime.describe()
        if method == "load":
            handle = f"h{next(numbers)}"
            extra = {}
            if params.get("executor") is not None:  # optional: one of describe's "executors"
                extra["executor"] = params["executor"]
            if params.get("options") is not None:  # optional: kv_budget_bytes, draft
                extra["options"] = params["options"]
            handles[handle] = runtime.load(params["package"], **extra)
            return {"handle": handle}
        engine = handles[params["handle"]]
        if method == "run":
            return encode_result(runtime.run(engine, decode_request(params["request"])))
        if method == "serve":  # the continuous_batching feature
            requests = [decode_request(r) for r in params["requests"]]
            served = runtime.serve(engine, requests, params["slots"])
            return {"results": [encode_result(s) for s in served]}
        if method == "create_session":
            return {"session_id": runtime.create_session(engine)}
        if method == "reset_session":
            runtime.reset_session(engine, params["session_id"])
            return {}
        if method == "close_session":
            runtime.close_session(engine, params["session_id"])
            return {}
        if method == "close":
            handles.pop(params["handle"], None)
            return {}
        raise KeyError(f"unknown method {method!r}")

    for line in stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        reply: dict = {"id": message.get("id")}
        try:
            reply["result"] = dispatch(message["method"], message.get("params") or {})
        except Refused as exc:
            reply["error"] = {"stage": exc.stage, "code": exc.code, "message": exc.message}
            if exc.violations is not None:
                reply["error"]["violations"] = [
                    {"code": code, "location": location} for code, location in exc.violations
                ]
        except Unsupported as exc:
            reply["error"] = {
                "stage": exc.stage,
                "unsupported": exc.feature,
                "message": exc.message,
            }
        except Exception as exc:  # anything else is a protocol-level failure of this server
            reply["error"] = {
                "stage": "protocol",
                "code": None,
                "message": f"{type(exc).__name__}: {exc}",
            }
        stdout.write(json.dumps(reply) + "\n")
        stdout.flush()


def main() -> int:
    executor = sys.argv[1] if len(sys.argv) > 1 else "ort"
    serve(ReferenceRuntime(executor))
    return 0


if __name__ == "__main__":
    sys.exit(main())
