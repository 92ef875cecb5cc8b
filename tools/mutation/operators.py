"""The mutants a careless edit of a protection would make, as cosmic-ray operators.

cosmic-ray's own operators change arithmetic, comparisons, booleans and numbers; none of them opens a firewall
to the internet, drops a quote or skips a chmod. These do, each the way a real regression would:

  WidenFileMode   0o600 → 0o644, 0o700 → 0o755, `chmod 700` → `chmod 755` in a shell string
  SkipProtection  a statement that is only a protective call (`f.chmod(…)`, `client.load_host_keys(…)`) not made
  OpenToInternet  a CIDR range literal → "0.0.0.0/0"
  DropQuoting     `shlex.quote(x)` → `(x)`, `shlex.join(argv)` → `" ".join(argv)`

and one stands in for a core operator that cosmic-ray 8.7.0 gets wrong:

  ReplaceException  an exception class an `except` catches → a name nothing defines, dotted names included (cosmic-ray's
                    ExceptionReplacer fails on `except (OSError, paramiko.SSHException)` and, on a lone
                    `except paramiko.BadHostKeyException`, replaces the `.`)
"""

from __future__ import annotations

import ast
import ipaddress
import re

import parso
from cosmic_ray.exceptions import CosmicRayTestingException
from cosmic_ray.operators.operator import Example, Operator
from parso.python.tree import FStringString, Name, Number, String

_CHMOD = re.compile(r"\bchmod ([0-7]{3,4})\b")
_PROTECTIVE_CALLS = {"chmod", "fchmod", "flock", "load_host_keys", "set_missing_host_key_policy"}


def _widened(mode: str) -> str:
    """Group and others may read (and enter, where the owner may): what a secret's file must never allow."""
    bits = int(mode, 8)
    return format(bits | 0o044 | (0o011 if bits & 0o100 else 0), "o")


class WidenFileMode(Operator):
    """A private file or directory mode made readable by everyone."""

    def mutation_positions(self, node):
        octal = isinstance(node, Number) and node.value.lower().startswith("0o")
        if octal and _widened(node.value[2:]) != node.value[2:]:
            yield node.start_pos, node.end_pos
        elif isinstance(node, (String, FStringString)) and any(
            _widened(m.group(1)) != m.group(1) for m in _CHMOD.finditer(node.value)
        ):
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        if isinstance(node, Number):
            node.value = "0o" + _widened(node.value[2:])
        else:
            node.value = _CHMOD.sub(lambda m: f"chmod {_widened(m.group(1))}", node.value)
        return node

    @classmethod
    def examples(cls):
        return (
            Example("f.chmod(0o600)", "f.chmod(0o644)"),
            Example("os.mkdir(d, 0o700)", "os.mkdir(d, 0o755)"),
            Example('run("chmod 700 -- d")', 'run("chmod 755 -- d")'),
        )


class SkipProtection(Operator):
    """A call made only for its protective effect (a mode, a lock, pinned host keys), not made."""

    def mutation_positions(self, node):
        if _protective_call_statement(node):
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        return parso.parse(node.get_first_leaf().prefix + "None")

    @classmethod
    def examples(cls):
        return (Example("f.chmod(0o600)\n", "None\n"), Example("x = f.chmod(0o600)\n", "x = f.chmod(0o600)\n"))


def _protective_call_statement(node) -> bool:
    if node.type not in ("atom_expr", "power") or node.parent is None or node.parent.type != "simple_stmt":
        return False
    *callee, call = node.children
    if call.type != "trailer" or call.children[0].value != "(":
        return False
    name = callee[-1].children[-1] if callee[-1].type == "trailer" else callee[-1]
    return getattr(name, "value", None) in _PROTECTIVE_CALLS


class OpenToInternet(Operator):
    """A network range literal replaced by the whole internet."""

    def mutation_positions(self, node):
        if isinstance(node, String) and _is_narrow_cidr(node):
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        quote = node.value[-1]
        node.value = f"{quote}0.0.0.0/0{quote}"
        return node

    @classmethod
    def examples(cls):
        return (Example('IAP = "35.235.240.0/20"', 'IAP = "0.0.0.0/0"'), Example('x = "a/b"', 'x = "a/b"'))


def _is_narrow_cidr(node: String) -> bool:
    try:
        value = ast.literal_eval(node.value)
        return isinstance(value, str) and "/" in value and ipaddress.ip_network(value).prefixlen > 0
    except (ValueError, SyntaxError):
        return False


class DropQuoting(Operator):
    """A value pasted into a shell command line without quoting."""

    def mutation_positions(self, node):
        if _shlex_call(node) in ("quote", "join"):
            yield node.start_pos, node.end_pos

    def mutate(self, node, index):
        argument = node.children[2].children[1].get_code(include_prefix=False)
        prefix = node.get_first_leaf().prefix
        unquoted = f"({argument})" if _shlex_call(node) == "quote" else f'" ".join({argument})'
        return parso.parse(prefix + unquoted)

    @classmethod
    def examples(cls):
        return (
            Example("cmd = 'ls ' + shlex.quote(path)", "cmd = 'ls ' + (path)"),
            Example("cmd = shlex.join(argv)", 'cmd = " ".join(argv)'),
        )


def _shlex_call(node) -> str | None:
    if node.type not in ("atom_expr", "power") or len(node.children) != 3:
        return None
    module, attribute, call = node.children
    if getattr(module, "value", None) != "shlex" or attribute.type != "trailer" or call.type != "trailer":
        return None
    if attribute.children[0].value != "." or call.children[0].value != "(" or len(call.children) != 3:
        return None
    return attribute.children[1].value


class ReplaceException(Operator):
    """An exception class an `except` clause catches, replaced as cosmic-ray's ExceptionReplacer does by a name the
    mutated module does not define: an exception that reaches the clause is not handled there (NameError)."""

    def mutation_positions(self, node):
        if node.type == "except_clause":
            for caught in _caught(node):
                yield caught.start_pos, caught.end_pos

    def mutate(self, node, index):
        caught = _caught(node)[index]
        replacement = Name(CosmicRayTestingException.__name__, caught.start_pos, caught.get_first_leaf().prefix)
        siblings = caught.parent.children
        siblings[siblings.index(caught)] = replacement
        replacement.parent = caught.parent
        return node

    @classmethod
    def examples(cls):
        other = CosmicRayTestingException.__name__
        return (
            Example("try: f()\nexcept OSError: pass", f"try: f()\nexcept {other}: pass"),
            Example("try: f()\nexcept paramiko.SSHException: pass", f"try: f()\nexcept {other}: pass"),
            Example(
                "try: f()\nexcept (OSError, paramiko.SSHException) as e: pass",
                f"try: f()\nexcept (OSError, {other}) as e: pass",
                occurrence=1,
            ),
            Example("try: f()\nexcept (OSError): pass", f"try: f()\nexcept ({other}): pass"),
            Example("try: f()\nexcept: pass", "try: f()\nexcept: pass"),
        )


def _caught(clause) -> list:
    """The class expressions of `except X`, `except X as e` and `except (X, a.Y) as e`."""
    caught = clause.children[1]
    if caught.type == "atom":  # parenthesised: one class or a tuple of them
        inner = caught.children[1]
        return inner.children[::2] if inner.type == "testlist_comp" else [inner]
    return [caught]


OPERATORS = {op.__name__: op for op in (WidenFileMode, SkipProtection, OpenToInternet, DropQuoting, ReplaceException)}


class ProtectionOperators:
    """A cosmic-ray operator provider (the interface of `cosmic_ray.operators.provider.OperatorProvider`)."""

    def __iter__(self):
        return iter(OPERATORS)

    def __getitem__(self, name):
        return OPERATORS[name]
