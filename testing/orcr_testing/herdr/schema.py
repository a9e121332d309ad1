"""Validate herdr wire messages against the published ``herdr-api.schema.json``.

The schema document keeps one schema per message family under ``schemas``
(``request``, ``success_response``, ``error_response``, ``event``,
``subscription_event``); every family is a ``oneOf`` discriminated by a
constant (``method``, ``result.type``, ``data.type``). We pick the branch by
that constant and validate against it alone: the same verdict as the whole
``oneOf`` (the constants are unique), far faster and with readable errors.

The schemas are vendored beside this module (``herdr_schema/``: the files as
herdr publishes them, their Apache-2.0 licence and a NOTICE with their
provenance), so the emulator validates on any machine: ``herdr-api.schema.json``
for socket protocols 19 and 20 (herdr 0.8), ``herdr-api-0.9.schema.json`` for 22
(herdr 0.9). ``ORCR_HERDR_SCHEMA`` names another copy instead, for every
protocol (to try a newer herdr's schema).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent / "herdr_schema"
VENDORED = _HERE / "herdr-api.schema.json"  # herdr 0.8, protocol 20
VENDORED_09 = _HERE / "herdr-api-0.9.schema.json"  # herdr 0.9, protocol 22
#: the vendored schema of each socket protocol the emulator speaks
BY_PROTOCOL = {19: VENDORED, 20: VENDORED, 22: VENDORED_09}
_URI = "urn:orcr:herdr-api"


def find_schema(protocol: int = 20) -> Path | None:
    """The vendored schema of ``protocol`` (0.8's for one it does not know), or
    ``$ORCR_HERDR_SCHEMA`` (None if that file is missing)."""
    env = os.environ.get("ORCR_HERDR_SCHEMA")
    if env:
        return Path(env) if Path(env).is_file() else None
    return BY_PROTOCOL.get(protocol, VENDORED)


class SchemaChecker:
    """Checks requests, replies and events; each ``check_*`` returns error strings."""

    def __init__(self, path: Path | str | None = None, protocol: int = 20):
        from jsonschema import Draft202012Validator
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT202012

        path = Path(path) if path else find_schema(protocol)
        if path is None:
            raise FileNotFoundError(
                f"ORCR_HERDR_SCHEMA={os.environ.get('ORCR_HERDR_SCHEMA')} is not a file; "
                "unset it to use the vendored herdr-api.schema.json"
            )
        self.path = path
        self.doc = json.loads(path.read_text())
        resource = Resource.from_contents(self.doc, default_specification=DRAFT202012)
        self._registry = Registry().with_resource(_URI, resource)
        self._validator_cls = Draft202012Validator
        schemas = self.doc["schemas"]
        self.protocol = self.doc.get("protocol")
        self._methods = {
            branch["properties"]["method"]["const"]: f"#/schemas/request/oneOf/{i}"
            for i, branch in enumerate(schemas["request"]["oneOf"])
        }
        results = schemas["success_response"]["$defs"]["ResponseResult"]["oneOf"]
        self._results = {
            branch["properties"]["type"]["const"]: (
                f"#/schemas/success_response/$defs/ResponseResult/oneOf/{i}"
            )
            for i, branch in enumerate(results)
        }
        events = schemas["event"]["$defs"]["EventData"]["oneOf"]
        self._events = {
            branch["properties"]["type"]["const"]: f"#/schemas/event/$defs/EventData/oneOf/{i}"
            for i, branch in enumerate(events)
        }
        self._cache: dict[str, Any] = {}

    @property
    def methods(self) -> frozenset[str]:
        return frozenset(self._methods)

    def _validator(self, schema: dict) -> Any:
        key = json.dumps(schema, sort_keys=True)
        if key not in self._cache:
            self._cache[key] = self._validator_cls(schema, registry=self._registry)
        return self._cache[key]

    def _errors(self, pointer: str, value: Any, where: str) -> list[str]:
        validator = self._validator({"$ref": _URI + pointer})
        out = []
        for err in validator.iter_errors(value):
            loc = "/".join(str(p) for p in err.absolute_path)
            out.append(f"{where}{'/' + loc if loc else ''}: {err.message}")
        return out

    def _envelope(self, family: str, value: Any, required: list[str]) -> list[str]:
        """The top-level shape: required keys, and ``id``/``event`` by the family's schema."""
        props = {
            name: {"$ref": f"{_URI}#/schemas/{family}/properties/{name}"}
            for name in required
            if name in ("id", "event")
        }
        validator = self._validator({"type": "object", "required": required, "properties": props})
        return [f"{family}: {e.message}" for e in validator.iter_errors(value)]

    def check_request(self, request: Any) -> list[str]:
        """Errors of one request object (an unknown method is an error)."""
        errors = self._envelope("request", request, ["id"])
        if errors:
            return errors
        method = request.get("method")
        if method not in self._methods:
            return [f"request: unknown method {method!r}"]
        return self._errors(self._methods[method], request, f"request {method}")

    def check_reply(self, reply: Any) -> list[str]:
        """Errors of one reply line (success or error)."""
        if isinstance(reply, dict) and "error" in reply:
            return self._errors("#/schemas/error_response", reply, "error_response")
        errors = self._envelope("success_response", reply, ["id", "result"])
        if errors:
            return errors
        result = reply["result"]
        rtype = result.get("type") if isinstance(result, dict) else None
        if rtype not in self._results:
            return [f"success_response: unknown result type {rtype!r}"]
        return self._errors(self._results[rtype], result, f"result {rtype}")

    def check_event(self, envelope: Any) -> list[str]:
        """Errors of one pushed event line (either envelope style)."""
        if not isinstance(envelope, dict) or not isinstance(envelope.get("event"), str):
            return [f"event: not an event envelope: {envelope!r:.200}"]
        name = envelope["event"]
        if "." in name:
            return self._errors("#/schemas/subscription_event", envelope, f"event {name}")
        errors = self._envelope("event", envelope, ["event", "data"])
        if errors:
            return errors
        data = envelope["data"]
        dtype = data.get("type") if isinstance(data, dict) else None
        if dtype not in self._events:
            return [f"event {name}: unknown data.type {dtype!r}"]
        if dtype != name:
            return [f"event {name}: data.type is {dtype!r}, not the event name"]
        return self._errors(self._events[dtype], data, f"event {name} data")


@cache
def checker_for(protocol: int) -> SchemaChecker:
    """One shared checker per protocol (building the validators costs a few milliseconds)."""
    return SchemaChecker(protocol=protocol)


def default_checker() -> SchemaChecker:
    """The checker of herdr 0.8 (protocol 20)."""
    return checker_for(20)
