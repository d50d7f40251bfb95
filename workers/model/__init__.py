"""The replay model: predict what each disk sees for a bio stream, a stack and a kernel policy.

Public API (issue 4; kernel-model.md is the spec, docs/model.md the notes):

* :func:`replay` (bios, stack, policy, seed) -> EventTable of the parsers' shape.
* :func:`bios_from_table` / :func:`bios_from_workload`: the input bio stream.
* :func:`stack_from_manifest` / :func:`stack_from_spec`: the device tree.
* :func:`preset_for_kernel` -> :class:`Policy`; ``Policy.with_overrides("k=v,...")``.
"""

from workers.model.limits import QueueLimits
from workers.model.policy import Policy
from workers.model.presets import kernel_version_warnings, preset_for_kernel
from workers.model.replay import BioStream, bios_from_table, bios_from_workload, replay
from workers.model.stack import Node, Stack, stack_from_manifest, stack_from_spec

__all__ = ["BioStream", "Node", "Policy", "QueueLimits", "Stack", "bios_from_table",
           "bios_from_workload", "kernel_version_warnings", "preset_for_kernel", "replay", "stack_from_manifest",
           "stack_from_spec"]
