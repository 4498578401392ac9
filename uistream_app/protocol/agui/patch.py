"""RFC 6902 JSON Patch over RFC 6901 pointers, for ``STATE_DELTA``.

The verifier applies every ``STATE_DELTA`` to the state the run's last
``STATE_SNAPSHOT`` established, as ``ag-ui-validate`` does (AGUI302), and
the TypeScript client does (``fast-json-patch``) before its subscribers
see the new state. Pure: the document is never mutated; a patch applies
whole or not at all. ``apply_patch`` raises ``PatchError`` naming the
operation that failed.
"""

from __future__ import annotations

import copy
import re
from typing import Any, Final

from .events import validate_patch_shape

__all__ = ["PatchError", "apply_patch"]

_INDEX: Final = re.compile(r"0|[1-9][0-9]*")


class PatchError(ValueError):
    """A patch that is malformed or does not apply."""

    def __init__(self, message: str, op_index: int = -1) -> None:
        super().__init__(message)
        self.op_index = op_index


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _equal(a: Any, b: Any) -> bool:
    # JavaScript's deep equality: true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return False
    return bool(a == b)


class _Doc:
    def __init__(self, value: Any) -> None:
        self.root = value

    def _parent(self, tokens: list[str], pointer: str) -> Any:
        node = self.root
        for token in tokens[:-1]:
            if isinstance(node, list):
                if not _INDEX.fullmatch(token) or int(token) >= len(node):
                    raise ValueError(f"{pointer}: no such path")
                node = node[int(token)]
            elif isinstance(node, dict):
                if token not in node:
                    raise ValueError(f"{pointer}: no such path")
                node = node[token]
            else:
                raise ValueError(f"{pointer}: goes through a value that is not an object or array")
        return node

    def get(self, pointer: str) -> Any:
        tokens = _tokens(pointer)
        if not tokens:
            return self.root
        parent = self._parent(tokens, pointer)
        last = tokens[-1]
        if isinstance(parent, list):
            if not _INDEX.fullmatch(last) or int(last) >= len(parent):
                raise ValueError(f"{pointer} does not exist")
            return parent[int(last)]
        if isinstance(parent, dict) and last in parent:
            return parent[last]
        raise ValueError(f"{pointer} does not exist")

    def put(self, pointer: str, value: Any, *, replace: bool) -> None:
        tokens = _tokens(pointer)
        if not tokens:
            self.root = value
            return
        parent = self._parent(tokens, pointer)
        last = tokens[-1]
        if isinstance(parent, list):
            if not replace and last == "-":
                parent.append(value)
                return
            if not _INDEX.fullmatch(last):
                raise ValueError(f"{pointer}: {last!r} is not an array index")
            index = int(last)
            if index > len(parent) or (replace and index == len(parent)):
                raise ValueError(f"{pointer}: index out of range")
            if replace:
                parent[index] = value
            else:
                parent.insert(index, value)
        elif isinstance(parent, dict):
            if replace and last not in parent:
                raise ValueError(f"{pointer} does not exist")
            parent[last] = value
        else:
            raise ValueError(f"{pointer}: the target's parent is not an object or array")

    def remove(self, pointer: str) -> Any:
        tokens = _tokens(pointer)
        if not tokens:
            raise ValueError("cannot remove the whole document")
        value = self.get(pointer)
        parent = self._parent(tokens, pointer)
        if isinstance(parent, list):
            del parent[int(tokens[-1])]
        else:
            del parent[tokens[-1]]
        return value


def apply_patch(document: Any, patch: Any) -> Any:
    """``document`` with ``patch`` applied (a new value; ``document`` is
    untouched). Raises ``PatchError`` for a malformed patch or an operation
    that does not apply (a missing path, a failed ``test``)."""
    problem = validate_patch_shape(patch)
    if problem:
        raise PatchError(f"not a JSON Patch: {problem}")
    doc = _Doc(copy.deepcopy(document))
    for i, op in enumerate(patch):
        kind, path = op["op"], op["path"]
        try:
            if kind == "add":
                doc.put(path, copy.deepcopy(op["value"]), replace=False)
            elif kind == "replace":
                doc.put(path, copy.deepcopy(op["value"]), replace=True)
            elif kind == "remove":
                doc.remove(path)
            elif kind == "move":
                source = op["from"]
                if path.startswith(source + "/"):
                    raise ValueError(f"cannot move {source} into its own child {path}")
                doc.put(path, doc.remove(source), replace=False)
            elif kind == "copy":
                doc.put(path, copy.deepcopy(doc.get(op["from"])), replace=False)
            elif not _equal(doc.get(path), op["value"]):  # test
                raise ValueError(f"test failed at {path!r}")
        except ValueError as exc:
            raise PatchError(f"operation {i} ({kind}): {exc}", i) from None
    return doc.root
