"""``indexed_scatter`` bounds (rule E56): checked before a component that writes a
fixed-capacity buffer runs, so a write outside the buffer is refused instead of wrapping."""

from __future__ import annotations

from ..arrays import to_host
from ..errors import RunError
from .tensors import scalar_int


def check_scatter_bounds(groups, component: str, inputs: dict, values: dict, counters, where):
    """``groups``: the workflow's ``(name, group)`` pairs whose update is ``indexed_scatter``;
    ``inputs``: the component's input ports about to be fed; ``values``: the run's values."""
    for gname, group in groups:
        update = group.update
        port = update.write_indices_ports.get(component)
        if port is None or port not in inputs:
            continue
        cap_value = values.get(update.capacity)
        if cap_value is None:
            raise RunError(
                "E56", f"{where}: capacity {update.capacity!r} of group {gname!r} is unavailable"
            )
        capacity = scalar_int(cap_value, f"capacity of group {gname!r}", "E56")
        axis = group.sequence_axis
        for cell_name, alias in group.ports.get(component, {}).items():
            value = inputs.get(alias.input)
            if value is not None and axis is not None and value.shape[axis] != capacity:
                raise RunError(
                    "E56",
                    f"{where}: buffer {cell_name!r} of group {gname!r} has extent "
                    f"{value.shape[axis]} on axis {axis}, not the capacity {capacity}",
                )
        destinations = to_host(inputs[port], counters).reshape(-1)
        bad = [int(d) for d in destinations if d < 0 or d >= capacity]
        if bad:
            raise RunError(
                "E56",
                f"{where}: write index {bad[0]} of group {gname!r} is outside [0, {capacity}) "
                f"(destinations {destinations.tolist()}); the graph was not run",
                hint="Keep every destination in [0, capacity); negative indices are refused "
                "because ScatterND would wrap them.",
            )
        lengths = values.get(group.logical_lengths) if group.logical_lengths else None
        length_port = update.kv_length_ports.get(component)
        if length_port is not None and length_port in inputs:
            lengths = inputs[length_port]
        if lengths is not None:
            flat = to_host(lengths, counters).reshape(-1)
            if flat.size != destinations.size:
                raise RunError(
                    "E56",
                    f"{where}: group {gname!r} has {flat.size} lengths for "
                    f"{destinations.size} write destinations",
                )
            bad = [int(n) for n in flat if n < 0 or n > capacity]
            if bad:
                raise RunError(
                    "E56",
                    f"{where}: logical length {bad[0]} of group {gname!r} is outside "
                    f"[0, {capacity}]",
                )
