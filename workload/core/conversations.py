"""Whether a row is a conversation MaxText's SFT accepts, read as MaxText 0.2.2 reads it, standard library only.

MaxText takes three column sets (data_processing_utils.validate_and_configure_sft_columns): `messages`, a list of
`{"role", "content"}` turns; `prompt` + `completion`; `question` + `answer` (strings, or lists of turns). Its
`apply_chat_template` (input_pipeline_utils.py) allows a system turn only first, pairs each user turn with the
assistant turn after it, and trains on the assistant's. So a row is refused here when a column is missing, a turn
is not `{"role", "content"}`, a role is none of system/user/assistant, a system turn is not first, user and
assistant do not alternate from a user turn, the last turn is not the assistant's (nothing to learn), or any content
is empty. `first_bad_row` reads JSON Lines itself, a bounded number of rows, so `pulumi preview` can say it.
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Iterator

COLUMN_SETS = (("messages",), ("prompt", "completion"), ("question", "answer"))
ROLES = ("system", "user", "assistant")


def columns_problem(columns: Iterable[str]) -> str | None:
    """Why MaxText would refuse these columns, or None."""
    if set(columns) in [set(c) for c in COLUMN_SETS]:
        return None
    return f"{list(columns)} is none of MaxText's SFT column sets {[list(c) for c in COLUMN_SETS]}"


def _turns_problem(turns: Any, *, whole: bool) -> str | None:
    """`whole`: the turns are a whole conversation (the `messages` column), which must alternate and end with the
    assistant; else one side of a pair."""
    if not isinstance(turns, list) or not turns:
        return "is not a non-empty list of turns"
    expected = "user"
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict) or not {"role", "content"} <= set(turn):
            return f"turn {index} is not a {{role, content}} object"
        role, content = turn["role"], turn["content"]
        if role not in ROLES:
            return f"turn {index} has role {role!r}, not one of {', '.join(ROLES)}"
        if not isinstance(content, str) or not content.strip():
            return f"turn {index} ({role}) has empty content"
        if role == "system":
            if index:
                return f"turn {index} is a system turn, which MaxText takes only first"
            continue
        if whole and role != expected:
            return f"turn {index} is {role}, where {expected} was due: user and assistant must alternate"
        expected = "assistant" if role == "user" else "user"
    if whole and expected != "user":
        return "ends with a user turn, which trains nothing: the last turn must be the assistant's"
    return None


def row_problem(row: Any, columns: tuple[str, ...]) -> str | None:
    """Why MaxText's SFT would refuse this row, or None."""
    if not isinstance(row, dict):
        return f"is a {type(row).__name__}, not an object of columns"
    missing = [c for c in columns if c not in row]
    if missing:
        return f"has no column {missing[0]!r} (its columns: {', '.join(sorted(row)) or 'none'})"
    if columns == ("messages",):
        problem = _turns_problem(row["messages"], whole=True)
        return None if problem is None else f"column 'messages' {problem}"
    for column in columns:
        value = row[column]
        if isinstance(value, str):
            if not value.strip():
                return f"column {column!r} is empty"
            continue
        problem = _turns_problem(value, whole=False)
        if problem is not None:
            return f"column {column!r} {problem}"
    return None


def jsonl_rows(lines: Iterable[str]) -> Iterator[tuple[int, Any, str | None]]:
    """(row number from 1, the row or None, why it is not JSON or None), blank lines skipped as `datasets` does."""
    number = 0
    for line in lines:
        if not line.strip():
            continue
        number += 1
        try:
            yield number, json.loads(line), None
        except json.JSONDecodeError as error:
            yield number, None, f"is not JSON ({error.msg} at column {error.colno})"


def first_bad_row(lines: Iterable[str], columns: tuple[str, ...], limit: int) -> tuple[int, str | None]:
    """(rows read, "row N why" for the first bad one or None), reading at most `limit` rows; an empty input is bad."""
    read = 0
    for number, row, not_json in jsonl_rows(lines):
        if number > limit:
            break
        read = number
        problem = not_json or row_problem(row, columns)
        if problem:
            return read, f"row {number} {problem}"
    return read, None if read else "has no rows"
