"""Control flow: If, Loop, Scan (subgraphs see the enclosing scope's values)."""

from __future__ import annotations

from ..registry import Unsupported, op


def _bool(node, value) -> bool:
    return bool(node.xp.asarray(value).reshape(-1)[0])


@op("If", since=(1, 11, 13, 16, 19, 21, 23, 24))
def if_(node, cond):
    branch = "then_branch" if _bool(node, cond) else "else_branch"
    return tuple(node.run_subgraph(branch, []))


@op("Loop", since=(1, 11, 13, 16, 19, 21, 23, 24))
def loop(node, trip_count=None, cond=None, *initial):
    xp = node.xp
    body = node.subgraphs["body"]
    n_carried = len(initial)
    carried = list(initial)
    scans: list[list] = [[] for _ in range(len(body.outputs) - 1 - n_carried)]
    limit = None if trip_count is None else int(xp.asarray(trip_count).reshape(-1)[0])
    keep_going = True if cond is None else _bool(node, cond)
    i = 0
    while keep_going and (limit is None or i < limit):
        outs = body.run_positional(
            [xp.asarray(i, dtype=xp.int64), xp.asarray(keep_going), *carried], outer=node.env
        )
        keep_going = _bool(node, outs[0])
        carried = list(outs[1 : 1 + n_carried])
        for k, value in enumerate(outs[1 + n_carried :]):
            scans[k].append(value)
        i += 1
    if any(not values for values in scans):
        # The element shape of a scan output that was never produced is unknowable here.
        raise ValueError("Loop produced no iteration for its scan outputs")
    return (*carried, *[xp.stack(values) for values in scans])


def _check_scan(node) -> None:
    for name in ("scan_input_directions", "scan_output_directions"):
        if any(node.attr(name, [])):
            raise Unsupported(f"Scan with reversed {name}")


@op("Scan", since=(9, 11, 16, 19, 21, 23, 24), check=_check_scan)
def scan(node, *inputs):
    xp = node.xp
    n_scan = node.attr("num_scan_inputs")
    n_state = len(inputs) - n_scan
    state = list(inputs[:n_state])
    sequences = list(inputs[n_state:])
    in_axes = node.attr("scan_input_axes", [0] * n_scan)
    sequences = [xp.moveaxis(s, a, 0) for s, a in zip(sequences, in_axes, strict=True)]
    body = node.subgraphs["body"]
    n_out = len(body.outputs) - n_state
    collected: list[list] = [[] for _ in range(n_out)]
    steps = sequences[0].shape[0] if sequences else 0
    for t in range(steps):
        outs = body.run_positional([*state, *[s[t] for s in sequences]], outer=node.env)
        state = list(outs[:n_state])
        for k, value in enumerate(outs[n_state:]):
            collected[k].append(value)
    out_axes = node.attr("scan_output_axes", [0] * n_out)
    stacked = [
        xp.moveaxis(xp.stack(vals), 0, a) for vals, a in zip(collected, out_axes, strict=True)
    ]
    return (*state, *stacked)
