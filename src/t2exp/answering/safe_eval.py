"""A small, safe evaluator for model-written arithmetic (Program-of-Thoughts answers).

Two forms: :func:`safe_eval` reads one expression; :func:`t2exp.answering.safe_exec.safe_exec` reads a short Python
program of assignments (``revenue_2019 = 1250`` ... ``answer = (revenue_2019 - revenue_2018) /
revenue_2018 * 100``), whose expressions may also use the names assigned before them, with
``if``/``else``, ``+=`` and one level of ``for`` loop over a written-out list or ``range()``. In both,
only numeric literals, + - * / // **, unary minus/plus, parentheses and the functions
abs/round/min/max/sum/len are allowed: no attributes, calls to anything else, imports, while loops or
builtins. ``%`` signs are stripped before parsing (models write "12.5%"), so ``%`` is never the
modulo operator, and a comma before three digits is a thousands separator. Sizes are bounded
(source length, AST nodes, exponent, the items a program's loops and comprehensions run over
together), so evaluation time is bounded too.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

MAX_SOURCE = 2000
MAX_NODES = 400
MAX_EXPONENT = 100
MAX_ITEMS = 100  # items one for loop or comprehension of safe_exec may run over
MAX_STEPS = 300  # items all the loops and comprehensions of one program run over together: run time stays within MAX_STEPS x MAX_NODES

_BIN = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_FUNCS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "sum": lambda *a: sum(a[0]) if len(a) == 1 else sum(a),
    "len": lambda a: len(a),
}


class UnsafeProgram(ValueError):
    pass


class Names(dict[str, float]):
    """A program's names, and the one budget of steps (:data:`MAX_STEPS`) its loops and
    comprehensions share, wherever they stand (a comprehension in a loop's body counts per pass)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def charge(self, items: int) -> None:
        self.steps += items
        if self.steps > MAX_STEPS:
            raise UnsafeProgram(f"the loops and comprehensions of the program run over more than {MAX_STEPS} items")


def _normalise(src: str) -> str:
    """Numbers as written in reports: 1,234.5 → 1234.5; $ and % signs dropped; typographic
    operators made ASCII; a trailing full stop or semicolon dropped."""
    src = re.sub(r"(?<=\d),(?=\d{3}\b)", "", src)
    src = src.replace("$", "").replace("%", "").replace("×", "*").replace("÷", "/").replace("−", "-")
    return src.rstrip(".;")


def _clean(src: str) -> str:
    src = src.strip().strip("`").strip()
    if src.lower().startswith("python"):
        src = src[6:].strip()
    return _normalise(src)


def _eval(node: ast.AST, env: dict[str, float] | None = None) -> float:
    """The value of an arithmetic expression; with ``env`` (a program's names), also names,
    numbers written as strings, conditionals, comparisons and one-value f-strings."""
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if env is not None:
        value = _eval_in_program(node, env)
        if value is not None:
            return value
    if isinstance(node, (ast.BinOp, ast.UnaryOp)):
        return _eval_arithmetic(node, env)
    if isinstance(node, (ast.Tuple, ast.List)):
        raise UnsafeProgram("sequence outside a function call")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _eval_call(node, env)
    raise UnsafeProgram(f"{type(node).__name__} is not allowed")


def _eval_in_program(node: ast.AST, env: dict[str, float]) -> float | None:
    """What only a program (not a bare expression) may hold; None: not one of these."""
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise UnsafeProgram(f"name {node.id!r} is used before it is assigned")
        return env[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:  # a program's answer written as a string: answer = "2019"
            return float(_normalise(node.value.strip()))
        except ValueError:
            raise UnsafeProgram(f"string {node.value[:20]!r} is not a number") from None
    if isinstance(node, ast.IfExp):
        return _eval(node.body if _truth(node.test, env) else node.orelse, env)
    if isinstance(node, (ast.Compare, ast.BoolOp)) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return 1.0 if _truth(node, env) else 0.0  # a yes/no answer (answer = a > b): 1 or 0
    if isinstance(node, ast.JoinedStr):
        shown = [v for v in node.values if isinstance(v, ast.FormattedValue)]
        if len(shown) != 1:  # print(f"{a:.2f}% and {b:.2f}%"): which one is the answer is unknown
            raise UnsafeProgram("an f-string must show exactly one value")
        return _eval(shown[0].value, env)
    return None


def _eval_arithmetic(node: ast.BinOp | ast.UnaryOp, env: dict[str, float] | None) -> float:
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise UnsafeProgram("exponent too large")
        return float(_BIN[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return float(_UNARY[type(node.op)](_eval(node.operand, env)))
    raise UnsafeProgram(f"{type(node).__name__} is not allowed")


def _eval_call(node: ast.Call, env: dict[str, float] | None) -> float:
    """One of the allowed functions (``_FUNCS``) on numbers, lists of numbers or a comprehension."""
    assert isinstance(node.func, ast.Name)
    args: list = []
    for a in node.args:
        if isinstance(a, (ast.Tuple, ast.List)):
            args.append([_eval(e, env) for e in a.elts])
        elif isinstance(a, (ast.GeneratorExp, ast.ListComp)) and env is not None:
            args.append(_comprehension(a, env))
        else:
            args.append(_eval(a, env))
    if node.func.id == "round" and len(args) == 2:  # round(x, ndigits): ndigits must be an int
        digits = args[1]
        if not isinstance(digits, float) or not digits.is_integer() or abs(digits) > 15:
            raise UnsafeProgram("round() digits must be a small integer")
        args[1] = int(digits)
    return float(_FUNCS[node.func.id](*args))


def _comprehension(node: ast.GeneratorExp | ast.ListComp, env: dict[str, float]) -> list[float]:
    """The values of ``sum(1 for x in [a, b, c] if x > 3000)`` or ``[x / 2 for x in range(3)]`` as
    a function's argument: one ``for`` over what a loop may run over (:func:`_items`, its items
    charged to the program's budget), its ``if`` conditions, no comprehension inside."""
    (gen,) = node.generators if len(node.generators) == 1 else (None,)
    if gen is None or not isinstance(gen.target, ast.Name) or gen.is_async:
        raise UnsafeProgram("a comprehension takes one for over one name")
    # none anywhere inside (its element, its conditions, what it runs over): each one's items are
    # charged once to the program's budget, where a comprehension in a condition would run per item
    if any(n is not node and isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)) for n in ast.walk(node)):
        raise UnsafeProgram("nested comprehensions are not allowed")
    out = []
    for value in _items(gen.iter, env):
        scope = {**env, gen.target.id: value}
        if all(_truth(cond, scope) for cond in gen.ifs):
            out.append(_eval(node.elt, scope))
    return out


_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
}


def _truth(node: ast.AST, env: dict[str, float]) -> bool:
    """A condition of :func:`safe_exec`: comparisons of arithmetic, and/or/not, else a value ≠ 0."""
    if isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        left = _eval(node.left, env)
        for op, comp in zip(node.ops, node.comparators, strict=True):
            right = _eval(comp, env)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BoolOp):
        parts = (_truth(v, env) for v in node.values)
        return all(parts) if isinstance(node.op, ast.And) else any(parts)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _truth(node.operand, env)
    return _eval(node, env) != 0


def _parse(src: str, mode: str) -> ast.AST:
    """``src`` parsed (``eval``: one expression, ``exec``: statements) within the size bounds."""
    if not src.strip() or len(src) > MAX_SOURCE:
        raise UnsafeProgram("empty or too long")
    try:
        tree = ast.parse(src, mode=mode)
    except SyntaxError as exc:
        raise UnsafeProgram(f"syntax error: {exc.msg}") from None
    except ValueError as exc:  # a null byte, a lone surrogate (UnicodeEncodeError)
        raise UnsafeProgram(f"not parseable: {type(exc).__name__}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise UnsafeProgram("expression too large" if mode == "eval" else "program too large")
    return tree


def safe_eval(source: str) -> float:
    """Evaluate an arithmetic expression; raises ``UnsafeProgram`` for anything else."""
    tree = _parse(_clean(source), "eval")
    try:
        value = _eval(tree)
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
        raise UnsafeProgram(f"{type(exc).__name__}: {exc}") from None
    if not math.isfinite(value):
        raise UnsafeProgram("result is not finite")
    return value


def _items(node: ast.expr, env: dict[str, float]) -> list[float]:
    """What a ``for`` loop of :func:`safe_exec` runs over: a list or tuple written out, or
    ``range()`` of whole numbers; at most ``MAX_ITEMS`` items, charged to the program's
    :class:`Names` budget before any is made, so run time stays bounded."""
    if isinstance(node, (ast.List, ast.Tuple)):
        count, make = len(node.elts), lambda: [_eval(e, env) for e in node.elts]
    elif (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and 1 <= len(node.args) <= 3
        and not node.keywords
    ):
        bounds = [_eval(a, env) for a in node.args]
        if not all(b.is_integer() for b in bounds):
            raise UnsafeProgram("range() takes whole numbers")
        span = range(*(int(b) for b in bounds))
        count, make = len(span), lambda: [float(i) for i in span]
    else:
        raise UnsafeProgram("a loop must run over a written-out list or range()")
    if count > MAX_ITEMS:
        raise UnsafeProgram(f"a loop over more than {MAX_ITEMS} items")
    if not isinstance(env, Names):  # a loop only runs in a program (safe_exec), never nested in a comprehension
        raise UnsafeProgram("a loop outside a program")
    env.charge(count)
    return make()
