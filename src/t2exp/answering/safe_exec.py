"""Short model-written Python programs run safely (:func:`safe_exec`): assignments whose
expressions :mod:`t2exp.answering.safe_eval` evaluates, ``if``/``else``, ``+=`` and one level of
``for`` loop over a written-out list or ``range()``; the answer is the value of ``answer`` (or
``ans``, ``result``), of a final ``print(x)`` or of the last assignment. :func:`program_literals`
lists the numbers a program writes (what the answer check compares with the evidence)."""

from __future__ import annotations

import ast
import math
import re

from t2exp.answering.safe_eval import _BIN, MAX_SOURCE, Names, UnsafeProgram, _clean, _eval, _items, _normalise, _parse, _truth

ANSWER_NAMES = ("answer", "ans", "result")


def _result_of(node: ast.stmt) -> ast.expr | None:
    """The expression a final ``print(x)`` or bare ``x`` statement shows, else None."""
    if not isinstance(node, ast.Expr):
        return None
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print":
        return value.args[0] if len(value.args) == 1 and not value.keywords else None
    return value


def _check(body: list[ast.stmt], looping: bool = False) -> None:
    """Every statement's kind, before any runs, in every branch (taken or not) and loop body:
    single-name assignments, ``+=`` and the like, ``if``, one level of ``for``, expressions, ``pass``."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            _check(stmt.body, looping)
            _check(stmt.orelse, looping)
        elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name) and not stmt.orelse:
            if looping:
                raise UnsafeProgram("nested loops are not allowed")
            _check(stmt.body, looping=True)
        elif not (_assigns(stmt) or isinstance(stmt, (ast.Expr, ast.Pass))):
            raise UnsafeProgram(f"{type(stmt).__name__} statement is not allowed")


def _assigns(stmt: ast.stmt) -> bool:
    """``x = ...`` or ``x += ...`` (any arithmetic operator) to one name."""
    if isinstance(stmt, ast.Assign):
        return len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
    return isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and type(stmt.op) in _BIN


def _run(body: list[ast.stmt], env: Names, last: float | None, final: ast.stmt) -> float | None:
    """Execute statements (:func:`_check`-ed) in order; the value of the latest assignment (or of
    ``final``'s print)."""
    for stmt in body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            env[stmt.targets[0].id] = last = _eval(stmt.value, env)
        elif isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            current = _eval(stmt.target, env)  # the Name rule: assigned before it is used
            env[stmt.target.id] = last = float(_BIN[type(stmt.op)](current, _eval(stmt.value, env)))
        elif isinstance(stmt, ast.If):
            last = _run(stmt.body if _truth(stmt.test, env) else stmt.orelse, env, last, final)
        elif isinstance(stmt, ast.For) and isinstance(stmt.target, ast.Name):
            for value in _items(stmt.iter, env):
                env[stmt.target.id] = value
                last = _run(stmt.body, env, last, final)
        elif (shown := _result_of(stmt)) is not None and stmt is final:
            last = _eval(shown, env)
        # else: an expression before the end (a print of a step) is not the answer: never evaluated; pass
    return last


def safe_exec(source: str) -> float:
    """Run a short program and return its answer. Statements: single-name assignments
    (``x = <expression>``: :func:`safe_eval`'s arithmetic plus names assigned earlier, numeric
    strings such as ``"2019"``, ``a if <condition> else b``, and a comparison, which is 1 or 0 as a
    yes/no answer), ``x += <expression>`` (any arithmetic operator), ``if``/``elif``/``else`` on
    comparisons (``answer = 2019 if sales_2019 > sales_2018 else 2018``), one level of ``for``
    loop over a written-out list or ``range()`` of at most ``MAX_ITEMS`` items (also as a
    comprehension inside ``sum``/``min``/``max``/``len``: ``sum(1 for x in [a, b] if x > 5)``;
    all of them together at most ``MAX_STEPS`` items), and prints (an
    expression statement before the end, such as the print of a step, is skipped unevaluated).
    The answer is the variable ``answer`` (or ``ans``/``result``), else a final ``print(x)`` (or
    ``print(f"{x:.2f}")`` with one value shown) or bare expression, else the last assignment
    made. Assigned names that are not identifiers (``s&p_500 = 1``) are joined with ``_`` when the
    program does not parse as written (:func:`_repair_names`). Anything else (imports, while
    loops, nested loops, attributes, other calls, function definitions) is refused."""
    tree = _program(source)
    _check(tree.body)
    env = Names()
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
    return [
        _as_float(n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)) and not isinstance(n.value, bool)
    ]


def _as_float(value: int | float) -> float:
    """A literal's value; an integer too large for a float is infinite (no evidence number)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf
