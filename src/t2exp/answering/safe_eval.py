"""A small, safe evaluator for model-written arithmetic (Program-of-Thoughts answers).

Two forms: :func:`safe_eval` reads one expression; :func:`safe_exec` reads a short Python
program of assignments (``revenue_2019 = 1250`` ... ``answer = (revenue_2019 - revenue_2018) /
revenue_2018 * 100``), whose expressions may also use the names assigned before them, with
``if``/``else``, ``+=`` and one level of ``for`` loop over a written-out list or ``range()``. In both,
only numeric literals, + - * / // **, unary minus/plus, parentheses and the functions
abs/round/min/max/sum/len are allowed: no attributes, calls to anything else, imports, while loops or
builtins. ``%`` signs are stripped before parsing (models write "12.5%"), so ``%`` is never the
modulo operator, and a comma before three digits is a thousands separator. Sizes are bounded
(source length, AST nodes, exponent), so evaluation time is bounded too.
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
MAX_ITEMS = 100  # items a for loop of safe_exec may run over (loops do not nest: steps stay within MAX_ITEMS x MAX_NODES)

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
    "abs": abs, "round": round, "min": min, "max": max, "sum": lambda *a: sum(a[0]) if len(a) == 1 else sum(a),
    "len": lambda a: len(a),
}


class UnsafeProgram(ValueError):
    pass


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
    if isinstance(node, ast.Expression):
        return _eval(node.body, env)
    if isinstance(node, ast.Name) and env is not None:
        if node.id not in env:
            raise UnsafeProgram(f"name {node.id!r} is used before it is assigned")
        return env[node.id]
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if env is not None and isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:  # a program's answer written as a string: answer = "2019"
            return float(_normalise(node.value.strip()))
        except ValueError:
            raise UnsafeProgram(f"string {node.value[:20]!r} is not a number") from None
    if env is not None and isinstance(node, ast.IfExp):
        return _eval(node.body if _truth(node.test, env) else node.orelse, env)
    if env is not None and (isinstance(node, (ast.Compare, ast.BoolOp)) or isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
        return 1.0 if _truth(node, env) else 0.0  # a yes/no answer (answer = a > b): 1 or 0
    if env is not None and isinstance(node, ast.JoinedStr):
        shown = [v for v in node.values if isinstance(v, ast.FormattedValue)]
        if len(shown) != 1:  # print(f"{a:.2f}% and {b:.2f}%"): which one is the answer is unknown
            raise UnsafeProgram("an f-string must show exactly one value")
        return _eval(shown[0].value, env)
    if isinstance(node, ast.BinOp) and type(node.op) in _BIN:
        left, right = _eval(node.left, env), _eval(node.right, env)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise UnsafeProgram("exponent too large")
        return float(_BIN[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return float(_UNARY[type(node.op)](_eval(node.operand, env)))
    if isinstance(node, (ast.Tuple, ast.List)):
        raise UnsafeProgram("sequence outside a function call")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
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
    raise UnsafeProgram(f"{type(node).__name__} is not allowed")


def _comprehension(node: ast.GeneratorExp | ast.ListComp, env: dict[str, float]) -> list[float]:
    """The values of ``sum(1 for x in [a, b, c] if x > 3000)`` or ``[x / 2 for x in range(3)]`` as
    a function's argument: one ``for`` over what a loop may run over (:func:`_items`), its ``if``
    conditions, no comprehension inside (the steps stay within ``MAX_ITEMS`` evaluations)."""
    (gen,) = node.generators if len(node.generators) == 1 else (None,)
    if gen is None or not isinstance(gen.target, ast.Name) or gen.is_async:
        raise UnsafeProgram("a comprehension takes one for over one name")
    # none anywhere inside (its element, its conditions, what it runs over): the steps stay within
    # MAX_ITEMS evaluations, where a comprehension in a condition would multiply them per level
    if any(n is not node and isinstance(n, (ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)) for n in ast.walk(node)):
        raise UnsafeProgram("nested comprehensions are not allowed")
    out = []
    for value in _items(gen.iter, env):
        scope = {**env, gen.target.id: value}
        if all(_truth(cond, scope) for cond in gen.ifs):
            out.append(_eval(node.elt, scope))
    return out


_COMPARE: dict[type[ast.cmpop], Callable[[float, float], bool]] = {
    ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Lt: operator.lt, ast.LtE: operator.le, ast.Eq: operator.eq, ast.NotEq: operator.ne,
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


ANSWER_NAMES = ("answer", "ans", "result")


def _result_of(node: ast.stmt) -> ast.expr | None:
    """The expression a final ``print(x)`` or bare ``x`` statement shows, else None."""
    if not isinstance(node, ast.Expr):
        return None
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return value.args[0] if len(value.args) == 1 and not value.keywords else None
    return value


def _items(node: ast.expr, env: dict[str, float]) -> list[float]:
    """What a ``for`` loop of :func:`safe_exec` runs over: a list or tuple written out, or
    ``range()`` of whole numbers; at most ``MAX_ITEMS`` items (counted before any is made), so run
    time stays bounded."""
    if isinstance(node, (ast.List, ast.Tuple)):
        count, make = len(node.elts), lambda: [_eval(e, env) for e in node.elts]
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range"
          and 1 <= len(node.args) <= 3 and not node.keywords):
        bounds = [_eval(a, env) for a in node.args]
        if not all(b.is_integer() for b in bounds):
            raise UnsafeProgram("range() takes whole numbers")
        span = range(*(int(b) for b in bounds))
        count, make = len(span), lambda: [float(i) for i in span]
    else:
        raise UnsafeProgram("a loop must run over a written-out list or range()")
    if count > MAX_ITEMS:
        raise UnsafeProgram(f"a loop over more than {MAX_ITEMS} items")
    return make()


def _run(body: list[ast.stmt], env: dict[str, float], last: float | None, final: ast.stmt, looping: bool = False) -> float | None:
    """Execute statements in order; the value of the latest assignment (or of ``final``'s print)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = last = _eval(stmt.value, env)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and type(stmt.op) in _BIN:
            current = _eval(stmt.target, env)  # the Name rule: assigned before it is used
            env[stmt.target.id] = last = float(_BIN[type(stmt.op)](current, _eval(stmt.value, env)))
        elif isinstance(stmt, ast.If):
            last = _run(stmt.body if _truth(stmt.test, env) else stmt.orelse, env, last, final, looping)
        elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and not stmt.orelse:
            if looping:
                raise UnsafeProgram("nested loops are not allowed")  # keeps the steps run within MAX_ITEMS x MAX_NODES
            for value in _items(stmt.iter, env):
                env[stmt.target.id] = value
                last = _run(stmt.body, env, last, final, looping=True)
        elif (shown := _result_of(stmt)) is not None and stmt is final:
            last = _eval(shown, env)
        elif shown is not None:
            continue  # an expression before the end (a print of a step) is not the answer: never evaluated
        elif isinstance(stmt, ast.Pass):
            continue
        else:
            raise UnsafeProgram(f"{type(stmt).__name__} statement is not allowed")
    return last


def safe_exec(source: str) -> float:
    """Run a short program and return its answer. Statements: single-name assignments
    (``x = <expression>``: :func:`safe_eval`'s arithmetic plus names assigned earlier, numeric
    strings such as ``"2019"``, ``a if <condition> else b``, and a comparison, which is 1 or 0 as a
    yes/no answer), ``x += <expression>`` (any arithmetic operator), ``if``/``elif``/``else`` on
    comparisons (``answer = 2019 if sales_2019 > sales_2018 else 2018``), one level of ``for``
    loop over a written-out list or ``range()`` of at most ``MAX_ITEMS`` items (also as a
    comprehension inside ``sum``/``min``/``max``/``len``: ``sum(1 for x in [a, b] if x > 5)``),
    and prints (an
    expression statement before the end, such as the print of a step, is skipped unevaluated).
    The answer is the variable ``answer`` (or ``ans``/``result``), else a final ``print(x)`` (or
    ``print(f"{x:.2f}")`` with one value shown) or bare expression, else the last assignment
    made. Assigned names that are not identifiers (``s&p_500 = 1``) are joined with ``_`` when the
    program does not parse as written (:func:`_repair_names`). Anything else (imports, while
    loops, nested loops, attributes, other calls, function definitions) is refused."""
    tree = _program(source)
    env: dict[str, float] = {}
    try:
        last = _run(tree.body, env, None, tree.body[-1]) if tree.body else None
    except UnsafeProgram:
        raise
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as exc:
        raise UnsafeProgram(f"{type(exc).__name__}: {exc}") from None
    named = next((env[n] for n in ANSWER_NAMES if n in env), None)
    value = named if named is not None else last
    if value is None or not math.isfinite(value):
        raise UnsafeProgram("no finite answer")
    return value


_BAD_NAME = re.compile(r"^([ \t]*)([A-Za-z_][\w&\- ]*[\w])[ \t]*=(?!=)", re.MULTILINE)


def _program(source: str) -> ast.Module:
    """A program's statements as :func:`safe_exec` reads them: its cleaned lines parsed within the
    size bounds, once more with :func:`_repair_names` applied when they do not parse as written."""
    try:
        tree = _parse("\n".join(_clean_lines(source)), "exec")
    except UnsafeProgram:
        if len(source) > MAX_SOURCE:  # no repair can bring it within the bound (and the repair is quadratic)
            raise
        repaired = _repair_names(source)
        if repaired == source:
            raise
        tree = _parse("\n".join(_clean_lines(repaired)), "exec")
    assert isinstance(tree, ast.Module)
    return tree


def _repair_names(source: str) -> str:
    """Names a model wrote that are not Python identifiers (``s&p_500_return = 208.1``,
    ``total_long-lived_assets_2019 = 9653``, ``total_purchase consideration = 265982``): each such
    assigned name becomes one identifier (runs of ``&``, ``-`` and spaces → ``_``) wherever it is
    written, so the program runs as its author meant it."""
    bad = {m.group(2) for m in _BAD_NAME.finditer(source) if not m.group(2).isidentifier()}
    for name in sorted(bad, key=len, reverse=True):
        source = source.replace(name, re.sub(r"[&\- ]+", "_", name))
    return source


def _clean_lines(source: str) -> list[str]:
    """The program's lines, each :func:`_normalise`-d (fence markers and comments dropped). A
    program without a block (no line ends with ``:``) has no use for indentation, so a stray
    leading space is dropped rather than failing the whole answer."""
    lines = []
    for line in source.strip().strip("`").splitlines():
        code = line.split("#", 1)[0].rstrip()
        if code.strip().lower() in ("", "python", "py"):
            continue
        lines.append(_normalise(code))
    if not any(line.endswith(":") for line in lines):
        lines = [line.lstrip() for line in lines]
    return lines


def program_literals(source: str) -> list[float]:
    """The number literals a program uses, as :func:`safe_eval` and :func:`safe_exec` read them
    (thousands separators, ``$`` and ``%`` dropped; a unary minus is an operator, so literals are
    non-negative). Empty when the source parses neither as one expression nor as a program
    :func:`safe_exec` reads (:func:`_program`: names repaired, within its size bounds)."""
    try:
        tree: ast.AST = _parse(_clean(source), "eval")
    except UnsafeProgram:
        try:
            tree = _program(source)
        except UnsafeProgram:
            return []
    return [_as_float(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)]


def _as_float(value: int | float) -> float:
    """A literal's value; an integer too large for a float is infinite (no evidence number)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf
