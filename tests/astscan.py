"""AST scans the guard tests share: what in src/specperf combines standard errors, parses a
verdict's sentence or compares a status word. They read the syntax tree, so a rename or a
new alias cannot hide a finding the way it hides from a grep."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "specperf"

# A name that holds an uncertainty: se, *_se, se_*, var, *_var, sd, *_sd, sigma*, variance.
_UNCERTAIN = re.compile(r"(^|_)(se|ses|var|vars|variance|sd|sigma\w*)($|_)", re.IGNORECASE)
_ROOTS = {"sqrt", "hypot"}
STATUS_WORDS = frozenset({"pass", "noted", "fail", "improved", "undetermined"})


def modules(skip: tuple[str, ...] = ("sim/",)) -> Iterator[tuple[str, ast.Module]]:
    """Every module of the package (its path under src/specperf) with its tree."""
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if not rel.startswith(skip):
            yield rel, ast.parse(path.read_text(encoding="utf-8"), rel)


def _name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_square(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return isinstance(node.right, ast.Constant) and node.right.value == 2
    return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) \
        and ast.dump(node.left) == ast.dump(node.right)


def _is_sum(node: ast.AST) -> bool:
    """``sum(...)``, ``np.sum(...)``, ``math.fsum(...)``."""
    return isinstance(node, ast.Call) and _name(node.func) in {"sum", "fsum"}


def _terms(node: ast.AST) -> list[ast.AST]:
    """The addends of ``a + b + c``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _terms(node.left) + _terms(node.right)
    return [node]


def _uncertain(node: ast.AST) -> bool:
    """Whether ``node`` squares something or reads a name that holds an uncertainty."""
    return any(_is_square(sub) or bool(_UNCERTAIN.search(_name(sub)))
               for sub in ast.walk(node))


def _combines(arg: ast.AST, local: dict[str, ast.AST]) -> bool:
    """Whether ``arg`` (a root's argument) is a sum of terms (``sum(...)``, or ``a + b`` over
    squares, uncertainties or sums); a bare local name is followed to what it was last
    assigned in its function."""
    if isinstance(arg, ast.Name) and arg.id in local:
        arg = local[arg.id]
    if _is_sum(arg):
        return True
    terms = _terms(arg)
    return len(terms) > 1 and any(_uncertain(t) or _is_sum(t) for t in terms)


def _assignments(func: ast.AST) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = node.value
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            found[node.target.id] = node.value
    return found


def _functions(tree: ast.Module) -> Iterator[ast.AST]:
    yield tree
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def combined_errors(tree: ast.Module) -> list[int]:
    """Lines that take a root of a sum of squares or uncertainties (``sqrt``, ``** 0.5``) or
    call ``hypot``: combining standard errors."""
    lines: set[int] = set()
    for func in _functions(tree):
        local = _assignments(func) if not isinstance(func, ast.Module) else {}
        for node in ast.walk(func):
            if isinstance(node, ast.Call) and _name(node.func) in _ROOTS:
                if _name(node.func) == "hypot" or node.args and _combines(node.args[0], local):
                    lines.add(node.lineno)
            elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow) \
                    and isinstance(node.right, ast.Constant) and node.right.value == 0.5 \
                    and _combines(node.left, local):
                lines.add(node.lineno)
    return sorted(lines)


def _reads_field(node: ast.AST, field: str) -> bool:
    """Whether ``node`` reads a verdict's ``field``: ``v[field]``, ``v.get(field)``,
    ``v.<field>`` (or a call around one)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant) \
                and sub.slice.value == field:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == field:
            return True
        if isinstance(sub, ast.Call) and _name(sub.func) == "get" and sub.args \
                and isinstance(sub.args[0], ast.Constant) and sub.args[0].value == field:
            return True
    return False


def _reads_message(node: ast.AST) -> bool:
    return _reads_field(node, "message")


_REGEX_CALLS = {"search", "match", "fullmatch", "findall", "finditer", "sub", "subn", "split"}


_MESSAGE_PARAM = re.compile(r"message|sentence", re.IGNORECASE)


def _local_message_names(func: ast.AST) -> set[str]:
    """Names a function binds to a verdict's message: a local assigned from one
    (``text = v["message"]``) or a parameter named for one (``message``, ``sentence``)."""
    names = {name for name, value in _assignments(func).items() if _reads_message(value)}
    if isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
        every = [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]
        names |= {a.arg for a in every if _MESSAGE_PARAM.search(a.arg)}
    return names


def regex_over_messages(tree: ast.Module) -> list[int]:
    """Lines that apply a regex (``re.*`` or a compiled pattern's method) to an expression
    that reads a verdict's ``message`` (directly or through a local name bound to it)."""
    lines: set[int] = set()
    for func in _functions(tree):
        names = _local_message_names(func) if not isinstance(func, ast.Module) else set()
        for node in ast.walk(func):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _REGEX_CALLS):
                continue
            owner = node.func.value
            is_re = isinstance(owner, ast.Name) and owner.id == "re"
            # str.split(...) is no regex: only re.split counts.
            if node.func.attr == "split" and not is_re:
                continue
            args = [*node.args, *(k.value for k in node.keywords)]
            if any(_reads_message(a) or any(isinstance(s, ast.Name) and s.id in names
                                            for s in ast.walk(a)) for a in args):
                lines.add(node.lineno)
    return sorted(lines)


def _status_literal(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in STATUS_WORDS
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_status_literal(e) for e in node.elts)
    return False


def status_comparisons(tree: ast.Module) -> list[int]:
    """Lines that compare (``==``, ``!=``, ``in``, ``not in``) against a bare status word or
    a literal collection holding one."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(
                isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops) \
                and any(_status_literal(x) for x in (node.left, *node.comparators)):
            lines.add(node.lineno)
    return sorted(lines)


def enclosing(tree: ast.Module, line: int) -> str:
    """The innermost function whose body holds ``line`` ('' at module level): allow-lists
    name a function, not a line number that moves with every edit."""
    name, span = "", -1
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) \
                and node.lineno <= line <= (node.end_lineno or node.lineno) \
                and node.lineno > span:
            name, span = node.name, node.lineno
    return name


def findings(scan: Callable[[ast.Module], list[int]], skip: tuple[str, ...] = ("sim/",)
             ) -> set[tuple[str, str]]:
    """``(module, function)`` of every finding of ``scan`` over the package."""
    return {(rel, enclosing(tree, line)) for rel, tree in modules(skip) for line in scan(tree)}


def kind_guesses(tree: ast.Module) -> list[int]:
    """Lines that guess what a verdict judged from its id instead of reading its ``scope``:
    ``….endswith(COMPARISONS)`` or ``….endswith("-fit")``, or a case id compared with
    "sweep"."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) == "endswith" and any(
                (isinstance(a, ast.Name | ast.Attribute) and _name(a) == "COMPARISONS")
                or (isinstance(a, ast.Constant) and a.value == "-fit") for a in node.args):
            lines.add(node.lineno)
        if isinstance(node, ast.Compare) and any(
                isinstance(x, ast.Constant) and x.value == "sweep"
                for x in (node.left, *node.comparators)) \
                and any(_reads_field(x, "case_id") for x in (node.left, *node.comparators)):
            lines.add(node.lineno)
    return sorted(lines)


def pytest_outcomes(tree: ast.Module) -> list[int]:
    """Lines that end a test by hand: ``pytest.fail(…)``, ``pytest.skip(…)``,
    ``pytest.xfail(…)``, through whatever name the module bound pytest or those functions
    to (``import pytest as p``, ``from pytest import skip``)."""
    outcomes = {"fail", "skip", "xfail"}
    modules_, functions = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules_ |= {a.asname or a.name for a in node.names if a.name == "pytest"}
        elif isinstance(node, ast.ImportFrom) and node.module == "pytest":
            functions |= {a.asname or a.name for a in node.names if a.name in outcomes}
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if (isinstance(f, ast.Attribute) and f.attr in outcomes and isinstance(f.value, ast.Name)
                and f.value.id in modules_) or (isinstance(f, ast.Name) and f.id in functions):
            lines.append(node.lineno)
    return sorted(lines)
