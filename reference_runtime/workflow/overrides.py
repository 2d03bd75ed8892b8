"""Application component overrides: a request runs a declared replacement in place of an
``application_overridable`` component (docs/format.md, decisions; rule C21).

The replacement must be interchangeable through the shared contract: both ONNX, the same
contract id and version, the same set of binding roles, the same effects, and per role the same
port direction and contract. Ports are remapped by role (the target's port bound to role R feeds
the replacement's port bound to R). Every mismatch is refused before anything runs (C21),
naming the target, the replacement and the broken fact.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RunError
from ..package.model import OnnxImplementation


@dataclass(frozen=True)
class Override:
    target: str
    replacement: str
    inputs: dict[str, str]  # target input port -> replacement input port
    outputs: dict[str, str]  # target output port -> replacement output port


def _refuse(target: str, replacement: str, why: str, hint: str = "") -> RunError:
    return RunError(
        "C21",
        f"component override {target!r} -> {replacement!r}: {why}",
        hint=hint
        or "Override an application_overridable ONNX component with a declared ONNX component "
        "of the same contract (id, version, roles, effects, port contracts).",
    )


def _ports(comp, package, name) -> tuple[dict, dict]:
    """Declared port contracts (or the graph's dtypes and ranks when ports are not declared)."""
    ports = comp.ports
    graph = package.graphs.get(name)

    def side(declared, from_graph):
        if declared is not None:
            return {p: (c.dtype, c.rank, tuple(c.shape or ())) for p, c in declared.items()}
        return {v.name: (v.dtype, v.rank, None) for v in from_graph.values()} if graph else {}

    return (
        side(ports.inputs or None, graph.inputs if graph else {}),
        side(ports.outputs or None, graph.outputs if graph else {}),
    )


def resolve_overrides(package, requested: dict | None) -> dict[str, Override]:
    workflow = package.metadata.workflow
    resolved = {}
    if requested is None:
        requested = {}
    if not isinstance(requested, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in requested.items()
    ):
        raise RunError(
            "C21",
            f"overrides must map component names to component names, not {requested!r:.60}",
            hint="Pass overrides={'target': 'replacement'} with declared component names.",
        )
    for target, replacement in sorted(requested.items()):
        comps = workflow.components
        for role, name in (("target", target), ("replacement", replacement)):
            if name not in comps:
                raise _refuse(
                    target,
                    replacement,
                    f"unknown {role} {name!r}",
                    f"Name declared components ({', '.join(sorted(comps))}).",
                )
        t, r = comps[target], comps[replacement]
        if not t.application_overridable:
            raise _refuse(target, replacement, f"{target!r} is not application_overridable")
        for name, comp in ((target, t), (replacement, r)):
            if not isinstance(comp.implementation, OnnxImplementation):
                raise _refuse(target, replacement, f"{name!r} is not an ONNX component")
            if comp.contract is None:
                raise _refuse(target, replacement, f"{name!r} declares no contract")
        tc, rc = t.contract, r.contract
        if (tc.id, tc.version) != (rc.id, rc.version):
            raise _refuse(
                target,
                replacement,
                f"contracts differ ({tc.id}@{tc.version} vs {rc.id}@{rc.version})",
            )
        if set(tc.bindings) != set(rc.bindings):
            raise _refuse(
                target,
                replacement,
                f"binding roles differ ({sorted(tc.bindings)} vs {sorted(rc.bindings)})",
            )
        if set(t.effects) != set(r.effects):
            raise _refuse(target, replacement, "effects differ")
        t_in, t_out = _ports(t, package, target)
        r_in, r_out = _ports(r, package, replacement)
        inputs, outputs = {}, {}
        for role, t_port in sorted(tc.bindings.items()):
            r_port = rc.bindings[role]
            for t_side, r_side, mapping, direction in (
                (t_in, r_in, inputs, "input"),
                (t_out, r_out, outputs, "output"),
            ):
                if (t_port in t_side) != (r_port in r_side):
                    raise _refuse(
                        target, replacement, f"role {role!r} is not an {direction} of both"
                    )
                if t_port in t_side:
                    want, have = t_side[t_port], r_side[r_port]
                    same = want[:2] == have[:2] and (
                        want[2] is None or have[2] is None or want[2] == have[2]
                    )
                    if not same:
                        raise _refuse(
                            target,
                            replacement,
                            f"role {role!r}: port {t_port!r} {want} and port {r_port!r} {have} "
                            "have different contracts",
                        )
                    mapping[t_port] = r_port
        resolved[target] = Override(target, replacement, inputs, outputs)
    return resolved


def invoke_override(override: Override, session, inputs: dict, outputs: list, where: str):
    """Run the replacement for one invoke of the target: ports remapped by role."""
    uncovered = [p for p in inputs if p not in override.inputs]
    uncovered += [p for p in outputs if p not in override.outputs]
    if uncovered:
        raise _refuse(
            override.target,
            override.replacement,
            f"{where}: port(s) {', '.join(sorted(uncovered))} are bound but no contract role "
            "covers them",
            "Bind every port of an overridable component to a contract role.",
        )
    results = session.run(
        {override.inputs[p]: v for p, v in inputs.items()},
        [override.outputs[p] for p in outputs],
    )
    return {p: results[override.outputs[p]] for p in outputs}
