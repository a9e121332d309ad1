"""The two plugin contracts: a multiplexer driver and a provider adapter.

Both are plain classes with documented methods (``typing.Protocol`` for type
checkers); plugins need not inherit from anything. Data crossing the contract
is carried by small frozen dataclasses, so the core never sees a multiplexer's
or a provider's private shapes. Import every name from here; the modules behind
it are :mod:`~orcr_core.contracts.driver` (the driver and its optional
capabilities), :mod:`~orcr_core.contracts.provider` (the provider and its
transcript reader) and :mod:`~orcr_core.contracts.status` (an agent row's status
and exit reason).
"""

from __future__ import annotations

from orcr_core.contracts.driver import (
    PARKING,
    AttachCommand,
    Availability,
    Discovery,
    Driver,
    DriverError,
    Focus,
    NativeResume,
    PaneEvents,
    PaneInfo,
    PaneProcesses,
    PaneRef,
    Parking,
    ProgramProcess,
    SessionPointer,
    SplitPrompt,
    StartSpec,
    UnmanagedAgent,
)
from orcr_core.contracts.provider import (
    InputState,
    LaunchSpec,
    Provider,
    ProviderError,
    ProviderFault,
    ScreenState,
    TranscriptReader,
    Turn,
    TurnState,
    Usage,
)
from orcr_core.contracts.status import AgentStatus, ExitReason

__all__ = [
    "PARKING",
    "AgentStatus",
    "AttachCommand",
    "Availability",
    "Discovery",
    "Driver",
    "DriverError",
    "ExitReason",
    "Focus",
    "InputState",
    "LaunchSpec",
    "NativeResume",
    "PaneEvents",
    "PaneInfo",
    "PaneProcesses",
    "PaneRef",
    "Parking",
    "ProgramProcess",
    "Provider",
    "ProviderError",
    "ProviderFault",
    "ScreenState",
    "SessionPointer",
    "SplitPrompt",
    "StartSpec",
    "TranscriptReader",
    "Turn",
    "TurnState",
    "UnmanagedAgent",
    "Usage",
]
