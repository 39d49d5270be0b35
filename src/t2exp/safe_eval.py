"""A small, safe evaluator for model-written arithmetic (Program-of-Thoughts answers).

Only numeric literals, + - * / // **, unary minus/plus, parentheses and the functions
abs/round/min/max/sum over literals are allowed: no names, attributes, calls to anything else,
imports or builtins. ``%`` signs are stripped before parsing (models write "12.5%"), so ``%`` is
never the modulo operator, and a comma before three digits is a thousands separator. Sizes are
bounded (source length, AST nodes, exponent), so evaluation time is bounded too.
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
    "abs": abs, "round": round, "min": min, "max": max, "sum": lambda *a: sum(a[0]) if len(a) == 1 else sum(a)
}


class UnsafeProgram(ValueError):
    pass


def _clean(src: str) -> str:
    src = src.strip().strip("`").strip()
    if src.lower().startswith("python"):
        src = src[6:].strip()
    # numbers as written in reports: 1,234.5 → 1234.5 ; $ and % signs dropped
    src = re.sub(r"(?<=\d),(?=\d{3}\b)", "", src)
    src = src.replace("$", "").replace("%", "").replace("×", "*").replace("÷", "/").replace("−", "-")
    src = src.rstrip(".;")
    return src


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise UnsafeProgram("exponent too large")
        return float(_BIN[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return float(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, (ast.Tuple, ast.List)):
        raise UnsafeProgram("sequence outside a function call")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        args: list = []
        for a in node.args:
            if isinstance(a, (ast.Tuple, ast.List)):
                args.append([_eval(e) for e in a.elts])
            else:
                args.append(_eval(a))
        if node.func.id == "round" and len(args) == 2:  # round(x, ndigits): ndigits must be an int
            digits = args[1]
            if not isinstance(digits, float) or not digits.is_integer() or abs(digits) > 15:
                raise UnsafeProgram("round() digits must be a small integer")
            args[1] = int(digits)
        return float(_FUNCS[node.func.id](*args))
    raise UnsafeProgram(f"{type(node).__name__} is not allowed")


def safe_eval(source: str) -> float:
    """Evaluate an arithmetic expression; raises ``UnsafeProgram`` for anything else."""
    src = _clean(source)
    if not src or len(src) > MAX_SOURCE:
        raise UnsafeProgram("empty or too long")
    try:
        tree = ast.parse(src, mode="eval")
    except SyntaxError as exc:
        raise UnsafeProgram(f"syntax error: {exc.msg}") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise UnsafeProgram("expression too large")
    try:
        value = _eval(tree)
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
        raise UnsafeProgram(f"{type(exc).__name__}: {exc}") from None
    if not math.isfinite(value):
        raise UnsafeProgram("result is not finite")
    return value


def program_literals(source: str) -> list[float]:
    """The number literals a program uses, as :func:`safe_eval` reads them (thousands separators,
    ``$`` and ``%`` dropped; a unary minus is an operator, so literals are non-negative). Empty
    when the source does not parse."""
    try:
        tree = ast.parse(_clean(source), mode="eval")
    except SyntaxError:
        return []
    return [float(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]
