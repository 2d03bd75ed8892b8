"""The JSON-lines transport: certify a runtime written in any language.

The client starts ``COMMAND`` and exchanges one JSON object per line on its stdin/stdout
(stderr is passed through). Requests are ``{"id", "method", "params"}``; replies are
``{"id", "result"}``, ``{"id", "error": {"stage", "code", "message"}}`` for a refusal (with
``"violations": [{"code", "location"}, ...]`` from a runtime declaring ``rule_locations``), or
``{"id", "error": {"stage", "unsupported", "message"}}`` (protocol version 2) when the runtime
does not support the feature named by ``unsupported``. Arrays travel as
``{"dtype", "shape", "base64"}``; a run result's ``events`` maps each event output to the list
of its emissions. ``load`` carries an ``executor`` only for runtimes whose ``describe`` lists
``executors``. See docs/conformance.md.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading

from ..protocol import (
    PROTOCOL_VERSION,
    Refused,
    Unsupported,
    decode_result,
    encode_request,
)

SPOKEN = (1, 2)  # the protocol versions this client speaks

DEFAULT_TIMEOUT_S = 120.0


class ProtocolError(RuntimeError):
    pass


class SubprocessRuntime:
    def __init__(self, command: list[str], timeout_s: float = DEFAULT_TIMEOUT_S):
        self.command = command
        self.timeout_s = timeout_s
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.next_id = 0
        self.lock = threading.Lock()
        hello = self._call("hello", {"protocol": PROTOCOL_VERSION})
        if hello.get("protocol") not in SPOKEN:
            raise ProtocolError(
                f"the runtime speaks protocol {hello.get('protocol')!r}; this suite speaks "
                f"versions {', '.join(map(str, SPOKEN))}"
            )
        self.protocol = hello["protocol"]

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def _call(self, method: str, params: dict):
        with self.lock:
            self.next_id += 1
            ident = self.next_id
            message = json.dumps({"id": ident, "method": method, "params": params})
            try:
                self.process.stdin.write(message + "\n")
                self.process.stdin.flush()
            except BrokenPipeError as exc:
                raise ProtocolError(f"the runtime exited (code {self.process.poll()})") from exc
            try:
                line = self.lines.get(timeout=self.timeout_s)
            except queue.Empty:
                self.process.kill()
                raise ProtocolError(f"{method}: no reply within {self.timeout_s:.0f} s") from None
            if line is None:
                raise ProtocolError(f"{method}: the runtime exited (code {self.process.poll()})")
            reply = json.loads(line)
            if reply.get("id") != ident:
                raise ProtocolError(f"{method}: reply id {reply.get('id')} for request {ident}")
            if "error" in reply:
                error = reply["error"]
                if error.get("stage") in ("load", "run"):
                    if error.get("unsupported"):
                        raise Unsupported(
                            error["stage"], error["unsupported"], error.get("message", "")
                        )
                    violations = error.get("violations")
                    if violations is not None:
                        violations = [(v.get("code"), v.get("location")) for v in violations]
                    raise Refused(
                        error["stage"], error.get("message", ""), error.get("code"), violations
                    )
                raise ProtocolError(f"{method}: {error.get('message')}")
            return reply["result"]

    def describe(self) -> dict:
        return {"protocol": self.protocol, **self._call("describe", {})}

    def load(self, package_dir: str, executor: str | None = None, options: dict | None = None):
        params = {"package": str(package_dir)}
        if executor is not None:
            params["executor"] = executor
        if options is not None:  # only for a runtime declaring kv_admission
            params["options"] = options
        return self._call("load", params)["handle"]

    def run(self, handle, request: dict) -> dict:
        reply = self._call("run", {"handle": handle, "request": encode_request(request)})
        return decode_result(reply)

    def serve(self, handle, requests: list[dict], slots: int) -> list[dict]:
        """Only for a runtime declaring continuous_batching."""
        params = {
            "handle": handle,
            "requests": [encode_request(r) for r in requests],
            "slots": slots,
        }
        # a served result without outputs stays as it came (the rows suite reports it)
        return [
            decode_result(s) if isinstance(s.get("outputs"), dict) else s
            for s in self._call("serve", params)["results"]
        ]

    def create_session(self, handle) -> str:
        return self._call("create_session", {"handle": handle})["session_id"]

    def reset_session(self, handle, sid: str) -> None:
        self._call("reset_session", {"handle": handle, "session_id": sid})

    def close_session(self, handle, sid: str) -> None:
        self._call("close_session", {"handle": handle, "session_id": sid})

    def close(self, handle) -> None:
        self._call("close", {"handle": handle})

    def shutdown(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
