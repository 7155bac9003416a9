"""SQL → frozen records: what a query reads, where, and under which predicates.

The guard decides on these records, never on SQL text. One walk over the
sqlglot tree splits the query into *scopes* (one per SELECT, set operation,
CTE, derived table, lateral or expression subquery) and records, per scope:

* its sources — physical tables (with schema/catalog), CTEs and derived
  tables (by scope id), table functions;
* every top-level conjunct of WHERE and each JOIN ON as a :class:`Fact`
  (``column IN literals``, ``column = column`` or something else), tagged with
  its origin so the rules know which rows it provably holds for;
* how each column is used inside predicates (:class:`ColumnUse`: a plain
  filter, inside an OR, under NOT, wrapped in a function, a range, …);
* tautologies such as ``1=1`` or ``x = x`` and whether they sit in an OR;
* the scope's output columns, and every column read (for column deny lists,
  with ``*`` expanded through the schema).

CTE names shadow physical tables exactly as SQL does: a CTE is visible to the
CTEs after it and to the body, not to its own definition (recursive CTEs are
recorded as unsupported). Identifiers are normalized with the dialect's rules
first, so a CTE matches a reference only when the database would match it.

Nothing here knows about permissions: the rules in :mod:`.rules` take these
records and a :class:`~.permissions.Permissions` and decide.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypedDict, cast

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

Clause = Literal["where", "on", "having", "qualify"]
UseKind = Literal[
    "filter", "join_key", "or", "negated", "fuzzy", "null_check", "non_equi", "subquery"
]
SourceKind = Literal["table", "derived", "function", "values"]
ProblemKind = Literal["not_read_only", "unsupported"]

LiteralValue = int | str

SAFE_TABLE_FUNCTIONS = frozenset(
    {"generateseries", "generatedatearray", "generatetimestamparray", "range", "unnest"}
)
"""Table functions that compute rows from their arguments and read nothing."""

GENERATORS = (exp.Explode, exp.Posexplode, exp.Inline, exp.Unnest)
"""Row generators allowed after ``LATERAL VIEW`` (Hive, Spark, MaxCompute)."""

_SYSTEM_SCHEMAS = frozenset(
    {"information_schema", "pg_catalog", "system", "mysql", "performance_schema", "sys"}
)
_SYSTEM_PREFIXES = ("pg_", "duckdb_", "sqlite_")
_FILE_HINTS = ("/", "\\", ":", ".")


@dataclass(frozen=True)
class TableRef:
    """One read of a physical table.

    Attributes:
        name: the table name (normalized for the dialect).
        db: the schema (or MaxCompute project / Hive database), if written.
        catalog: the catalog, if written.
        scope: id of the scope that reads it.
        key: the name its columns are qualified with there (alias or name).
    """

    name: str
    db: str | None
    catalog: str | None
    scope: int
    key: str

    @property
    def qualified(self) -> str:
        """``catalog.db.name`` with the parts that were written."""
        return ".".join(p for p in (self.catalog, self.db, self.name) if p)

    @property
    def is_system(self) -> bool:
        """Whether this is a system catalog table (``information_schema``, ``pg_*``, …)."""
        db = (self.db or "").lower()
        return db in _SYSTEM_SCHEMAS or self.name.lower().startswith(_SYSTEM_PREFIXES)


@dataclass(frozen=True)
class Source:
    """One item of a scope's FROM clause (the FROM itself is position 0).

    ``columns`` are the names visible to the scope (``None`` when unknown:
    a table missing from the schema, or a derived table over one).
    ``join_side`` is ``left``/``right``/``full`` or empty; ``join_kind`` is
    ``inner``, ``cross``, ``semi``, ``anti`` or empty.
    """

    key: str
    kind: SourceKind
    position: int
    table: TableRef | None = None
    derived: int | None = None
    lateral: bool = False
    columns: tuple[str, ...] | None = None
    join_side: str = ""
    join_kind: str = ""
    using: tuple[str, ...] = ()


@dataclass(frozen=True)
class ColumnRef:
    """A column resolved to a source: ``scope`` -1 means it could not be resolved."""

    scope: int
    source: str | None
    name: str

    @property
    def resolved(self) -> bool:
        """Whether the column was tied to one source."""
        return self.scope >= 0 and self.source is not None


@dataclass(frozen=True)
class Origin:
    """Where a predicate sits: a clause, and for ``on`` the join position."""

    clause: Clause
    position: int = 0


@dataclass(frozen=True)
class Fact:
    """One top-level conjunct of WHERE or a JOIN ON.

    ``kind`` ``in``: ``column`` equals one of ``values`` (``=``, ``IN`` or an
    OR of equalities on one column); ``eq``: ``column = other``; ``other``:
    anything else (it may narrow rows, but proves nothing).
    """

    origin: Origin
    kind: Literal["in", "eq", "other"]
    column: ColumnRef | None = None
    values: tuple[LiteralValue, ...] = ()
    other: ColumnRef | None = None


@dataclass(frozen=True)
class ColumnUse:
    """How a column is used inside a predicate (WHERE, ON, HAVING, QUALIFY)."""

    column: ColumnRef
    origin: Origin
    kind: UseKind


@dataclass(frozen=True)
class Tautology:
    """A predicate that is always true, such as ``1=1``, ``TRUE`` or ``x = x``.

    ``in_or``: it is a branch of an OR (the classic bypass); ``on_column``: it
    compares a column with itself, which looks like a filter but is not one.
    """

    origin: Origin
    text: str
    in_or: bool
    on_column: bool


@dataclass(frozen=True)
class Output:
    """One output column of a scope; ``column`` when it is a plain column reference."""

    name: str
    column: ColumnRef | None


@dataclass(frozen=True)
class Scope:
    """One query level: a SELECT, or a set operation over ``branches``.

    ``outer`` is the scope whose sources correlated columns may refer to;
    ``deps`` are the derived/CTE scopes read as sources (evaluated first);
    ``children`` are lateral and expression subqueries (evaluated after).
    ``outputs`` is ``None`` when a ``*`` could not be expanded.
    """

    id: int
    kind: Literal["select", "union"]
    outer: int | None
    sources: tuple[Source, ...] = ()
    facts: tuple[Fact, ...] = ()
    uses: tuple[ColumnUse, ...] = ()
    tautologies: tuple[Tautology, ...] = ()
    outputs: tuple[Output, ...] | None = ()
    branches: tuple[int, ...] = ()
    deps: tuple[int, ...] = ()
    children: tuple[int, ...] = ()
    reads: tuple[ColumnRef, ...] = ()
    stars: tuple[str, ...] = ()

    def source(self, key: str | None) -> Source | None:
        """The source with this key, if any."""
        return next((s for s in self.sources if s.key == key), None)


@dataclass(frozen=True)
class Problem:
    """Something the guard will not run: a write, a file read, syntax it does not model."""

    kind: ProblemKind
    what: str


@dataclass(frozen=True)
class FunctionUse:
    """A function call: its sqlglot class (``Sum``) or, for unknown ones, ``Anonymous``."""

    name: str
    known: bool


@dataclass(frozen=True)
class Analysis:
    """Everything the rules need to know about one SQL text."""

    sql: str
    dialect: str
    statements: int = 0
    statement_kind: str = ""
    parse_error: str | None = None
    scopes: tuple[Scope, ...] = ()
    tables: tuple[TableRef, ...] = ()
    functions: tuple[FunctionUse, ...] = ()
    node_types: frozenset[str] = frozenset()
    problems: tuple[Problem, ...] = ()
    tree: exp.Expression | None = field(default=None, compare=False, repr=False)
    selects: tuple[exp.Expression | None, ...] = field(default=(), compare=False, repr=False)

    @property
    def table_names(self) -> tuple[str, ...]:
        """Physical tables read, qualified as written, deduplicated in order."""
        return tuple(dict.fromkeys(t.qualified for t in self.tables))


def unparen(node: exp.Expression) -> exp.Expression:
    """Strip any number of parentheses."""
    while isinstance(node, exp.Paren):
        node = node.this
    return node


def literal_value(node: exp.Expression) -> LiteralValue | None:
    """A literal as a comparable value: integers (also digit-only strings) or text.

    Returns ``None`` when the node is not a plain literal (so it proves nothing).
    """
    node = unparen(node)
    negative = False
    if isinstance(node, exp.Neg):
        negative, node = True, unparen(node.this)
    if not isinstance(node, exp.Literal):
        return None
    text = str(node.this)
    if text.isdigit() and text.isascii():
        return -int(text) if negative else int(text)
    if negative:
        return "-" + text
    return ("'" + text + "'") if node.is_string else text


def _const(node: exp.Expression) -> object | None:
    """The value of a constant scalar expression, or ``None``."""
    node = unparen(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return str(node.this)
        try:
            return float(node.this)
        except ValueError:
            return None
    if isinstance(node, exp.Neg):
        inner = _const(node.this)
        return -inner if isinstance(inner, float) else None
    if isinstance(node, exp.Cast):
        inner = _const(node.this)
        return str(inner) if inner is not None and not isinstance(inner, bool) else inner
    if isinstance(node, (exp.Add, exp.Sub, exp.Mul)):
        left, right = _const(node.this), _const(node.expression)
        if isinstance(left, float) and isinstance(right, float):
            if isinstance(node, exp.Add):
                return left + right
            return left - right if isinstance(node, exp.Sub) else left * right
    return None


_COMPARE = {
    exp.EQ: lambda a, b: a == b,
    exp.NEQ: lambda a, b: a != b,
    exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b,
    exp.LT: lambda a, b: a < b,
    exp.LTE: lambda a, b: a <= b,
    exp.NullSafeEQ: lambda a, b: a == b,
}


def truth(node: exp.Expression) -> bool | None:
    """Whether a predicate is constantly true/false; ``None`` when it depends on rows.

    ``x = x`` counts as true: it holds for every row where ``x`` is set.
    """
    node = unparen(node)
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        if not node.is_string:
            try:
                return float(node.this) != 0
            except ValueError:
                return None
        text = str(node.this).strip().lower()
        if text in ("t", "true", "y", "yes", "on"):
            return True
        try:
            return float(text) != 0
        except ValueError:
            return None
    if isinstance(node, exp.Not):
        inner = truth(node.this)
        return None if inner is None else not inner
    if isinstance(node, exp.And):
        a, b = truth(node.this), truth(node.expression)
        if a is False or b is False:
            return False
        return True if a and b else None
    if isinstance(node, exp.Or):
        a, b = truth(node.this), truth(node.expression)
        if a or b:
            return True
        return False if a is False and b is False else None
    if isinstance(node, exp.Is):
        value = _const(node.this)
        if isinstance(unparen(node.expression), exp.Null) and isinstance(
            unparen(node.this), exp.Null
        ):
            return True
        return False if value is not None else None
    compare = _COMPARE.get(type(node)) if isinstance(node, exp.Binary) else None
    if compare is not None:
        left, right = unparen(node.this), unparen(node.expression)
        if isinstance(node, (exp.EQ, exp.NullSafeEQ, exp.GTE, exp.LTE)) and left == right:
            return True
        lhs, rhs = _const(left), _const(right)
        if lhs is None or rhs is None or type(lhs) is not type(rhs):
            return None
        try:
            return bool(compare(lhs, rhs))
        except TypeError:
            return None
    if isinstance(node, exp.In) and not node.args.get("query"):
        value = _const(node.this)
        items = [_const(e) for e in node.expressions]
        if value is None or any(i is None for i in items):
            return None
        return value in items
    if isinstance(node, exp.Between):
        v, lo, hi = _const(node.this), _const(node.args["low"]), _const(node.args["high"])
        if isinstance(v, float) and isinstance(lo, float) and isinstance(hi, float):
            return lo <= v <= hi
    return None


def conjuncts(node: exp.Expression | None) -> Iterator[exp.Expression]:
    """The top-level AND chain of a predicate, parentheses removed."""
    if node is None:
        return
    node = unparen(node)
    if isinstance(node, exp.And):
        yield from conjuncts(node.this)
        yield from conjuncts(node.expression)
    else:
        yield node


def _or_branches(node: exp.Expression) -> Iterator[exp.Expression]:
    node = unparen(node)
    if isinstance(node, exp.Or):
        yield from _or_branches(node.this)
        yield from _or_branches(node.expression)
    else:
        yield node


_QUERY = (exp.Select, exp.SetOperation)
_FUZZY = (
    exp.Like,
    exp.ILike,
    exp.Between,
    exp.RegexpLike,
    exp.RegexpILike,
    exp.SimilarTo,
    exp.Glob,
)
_RANGE = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NEQ, exp.NullSafeNEQ)


@dataclass
class _Building:
    """A scope while it is being walked (mutable; frozen into :class:`Scope`)."""

    id: int
    kind: Literal["select", "union"]
    outer: int | None
    sources: list[Source] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    uses: list[ColumnUse] = field(default_factory=list)
    tautologies: list[Tautology] = field(default_factory=list)
    outputs: list[Output] | None = field(default_factory=list)
    branches: list[int] = field(default_factory=list)
    deps: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    reads: list[ColumnRef] = field(default_factory=list)
    stars: list[str] = field(default_factory=list)
    aliases: set[str] = field(default_factory=set)

    def freeze(self) -> Scope:
        return Scope(
            id=self.id,
            kind=self.kind,
            outer=self.outer,
            sources=tuple(self.sources),
            facts=tuple(self.facts),
            uses=tuple(self.uses),
            tautologies=tuple(self.tautologies),
            outputs=None if self.outputs is None else tuple(self.outputs),
            branches=tuple(self.branches),
            deps=tuple(dict.fromkeys(self.deps)),
            children=tuple(self.children),
            reads=tuple(dict.fromkeys(self.reads)),
            stars=tuple(dict.fromkeys(self.stars)),
        )


@dataclass(frozen=True)
class _Cte:
    scope: int
    columns: tuple[str, ...] | None


class _Common(TypedDict):
    position: int
    join_side: str
    join_kind: str
    using: tuple[str, ...]


class _Walker:
    """One pass over a parsed statement, building scopes."""

    def __init__(self, schema: Mapping[str, tuple[str, ...]]) -> None:
        self.schema = schema
        self.scopes: list[_Building] = []
        self.selects: list[exp.Expression | None] = []
        self.tables: list[TableRef] = []
        self.problems: list[Problem] = []

    # --- scopes -----------------------------------------------------------

    def new_scope(self, kind: Literal["select", "union"], outer: int | None) -> _Building:
        scope = _Building(id=len(self.scopes), kind=kind, outer=outer)
        self.scopes.append(scope)
        self.selects.append(None)
        return scope

    def problem(self, kind: ProblemKind, what: str) -> None:
        self.problems.append(Problem(kind, what))

    def query(self, node: exp.Expression, outer: int | None, ctes: Mapping[str, _Cte]) -> int:
        """Walk one query expression; return the id of its scope."""
        node = unparen(node)
        if isinstance(node, exp.Subquery):
            if node.args.get("order") or node.args.get("limit") or node.args.get("offset"):
                self.problem("unsupported", "ORDER BY/LIMIT outside a parenthesized query")
            return self.query(node.this, outer, ctes)
        visible = dict(ctes)
        with_ = node.args.get("with_")
        if isinstance(with_, exp.With):
            if with_.args.get("recursive"):
                self.problem("unsupported", "WITH RECURSIVE")
            for cte in with_.expressions:
                body = cte.this
                if not isinstance(unparen(body), (*_QUERY, exp.Subquery)):
                    self.problem("not_read_only", f"CTE {cte.alias} is a {type(body).__name__}")
                    continue
                scope_id = self.query(body, outer, visible)
                columns = tuple(c.name.lower() for c in cte.args["alias"].columns) or None
                visible[cte.alias] = _Cte(scope_id, columns)
        if isinstance(node, exp.SetOperation):
            scope = self.new_scope("union", outer)
            scope.branches = [
                self.query(node.this, outer, visible),
                self.query(node.expression, outer, visible),
            ]
            self.selects[scope.id] = node
            first = self.scopes[scope.branches[0]]
            scope.outputs = None if first.outputs is None else list(first.outputs)
            return scope.id
        if isinstance(node, exp.Select):
            return self.select(node, outer, visible)
        self.problem("not_read_only", f"{type(node).__name__} inside a query")
        return self.new_scope("select", outer).id

    def select(self, node: exp.Select, outer: int | None, ctes: Mapping[str, _Cte]) -> int:
        scope = self.new_scope("select", outer)
        self.selects[scope.id] = node
        for arg, what in (("into", "SELECT INTO"), ("locks", "FOR UPDATE/SHARE")):
            if node.args.get(arg):
                self.problem("not_read_only", what)
        for arg in ("hint", "prewhere", "settings", "format", "connect", "match", "sample"):
            if node.args.get(arg):
                self.problem("unsupported", arg.upper())
        items: list[tuple[exp.Expression, exp.Join | None]] = []
        from_ = node.args.get("from_")
        if isinstance(from_, exp.From):
            items.append((from_.this, None))
        items += [(j.this, j) for j in node.args.get("joins") or []]
        items += [(lat, None) for lat in node.args.get("laterals") or []]
        for position, (item, join) in enumerate(items):
            source = self.source(item, scope, position, join, ctes)
            if source is not None:
                scope.sources.append(source)
        for projection in node.expressions:
            if projection.alias:
                scope.aliases.add(projection.alias.lower())
        self.outputs(node, scope)
        for position, (_, join) in enumerate(items):
            if join is None:
                continue
            for name in join.args.get("using") or []:
                self.using_fact(scope, position, name.name.lower())
            self.predicate(scope, join.args.get("on"), Origin("on", position), ctes)
        where = node.args.get("where")
        self.predicate(scope, where.this if where else None, Origin("where"), ctes)
        having = node.args.get("having")
        self.predicate(scope, having.this if having else None, Origin("having"), ctes)
        qualify = node.args.get("qualify")
        self.predicate(scope, qualify.this if qualify else None, Origin("qualify"), ctes)
        skip = {"from_", "joins", "laterals", "with_", "where", "having", "qualify"}
        for key, value in node.args.items():
            if key in skip or value is None:
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, exp.Expression):
                    self.expressions(child, scope, ctes, aliases_first=key == "order")
        return scope.id

    # --- sources ------------------------------------------------------------

    def source(
        self,
        item: exp.Expression,
        scope: _Building,
        position: int,
        join: exp.Join | None,
        ctes: Mapping[str, _Cte],
    ) -> Source | None:
        side = (join.side or "").lower() if join else ""
        kind = (join.kind or "").lower() if join else ""
        if join is not None:
            method = (join.method or "").upper()
            if method:
                self.problem("unsupported", f"{method} JOIN")
            if kind and kind not in ("inner", "cross", "outer", "semi", "anti"):
                self.problem("unsupported", f"{kind.upper()} JOIN")
        using = tuple(u.name.lower() for u in (join.args.get("using") or [])) if join else ()
        common = _Common(position=position, join_side=side, join_kind=kind, using=using)
        alias = item.alias
        if isinstance(item, exp.Table):
            return self.table_source(item, scope, ctes, common)
        if isinstance(item, exp.Subquery):
            inner = unparen(item.this)
            if not isinstance(inner, (*_QUERY, exp.Subquery)):
                self.problem("unsupported", "parenthesized join group")
                return None
            derived = self.query(inner, scope.outer, ctes)
            scope.deps.append(derived)
            columns = self.renamed(item, self.scopes[derived].outputs)
            key = alias or f"_derived{derived}"
            return Source(key, "derived", derived=derived, columns=columns, **common)
        if isinstance(item, exp.Lateral):
            inner = item.this
            key = alias or f"_lateral{position}"
            if isinstance(inner, exp.Subquery):
                derived = self.query(inner.this, scope.id, ctes)
                scope.children.append(derived)
                columns = self.renamed(item, self.scopes[derived].outputs)
                return Source(
                    key,
                    "derived",
                    derived=derived,
                    lateral=True,
                    columns=columns,
                    **common,
                )
            if isinstance(inner, GENERATORS):
                self.expressions(inner, scope, ctes)
                names = (
                    tuple(c.name.lower() for c in item.args["alias"].columns)
                    if item.args.get("alias")
                    else ()
                )
                return Source(key, "function", columns=names or None, **common)
            self.problem("unsupported", f"LATERAL {type(inner).__name__}")
            return None
        if isinstance(item, exp.Unnest):
            self.expressions(item, scope, ctes)
            names = (
                tuple(c.name.lower() for c in item.args["alias"].columns)
                if item.args.get("alias")
                else ()
            )
            return Source(
                alias or f"_unnest{position}", "function", columns=names or None, **common
            )
        if isinstance(item, exp.Values):
            names = (
                tuple(c.name.lower() for c in item.args["alias"].columns)
                if item.args.get("alias")
                else ()
            )
            for row in item.expressions:
                self.expressions(row, scope, ctes)
            return Source(alias or f"_values{position}", "values", columns=names or None, **common)
        self.problem("unsupported", f"{type(item).__name__} in FROM")
        return None

    def table_source(
        self,
        item: exp.Table,
        scope: _Building,
        ctes: Mapping[str, _Cte],
        common: _Common,
    ) -> Source | None:
        this = item.this
        alias_node = item.args.get("alias")
        if item.args.get("joins"):
            self.problem("unsupported", "parenthesized join group")
        for arg in ("pivots", "version", "hints", "when", "changes", "laterals"):
            if item.args.get(arg):
                self.problem("unsupported", f"table {arg}")
        if isinstance(this, exp.Func):
            name = type(this).__name__.lower()
            if isinstance(this, exp.Anonymous):
                name = str(this.this).lower().replace("_", "")
            if name not in SAFE_TABLE_FUNCTIONS:
                label = this.sql_name() if not isinstance(this, exp.Anonymous) else this.this
                self.problem("not_read_only", f"table function {label}")
                return None
            self.expressions(this, scope, ctes)
            names = tuple(c.name.lower() for c in alias_node.columns) if alias_node else ()
            key = item.alias or f"_function{common['position']}"
            return Source(key, "function", columns=names or None, **common)
        if not isinstance(this, exp.Identifier):
            self.problem("unsupported", f"{type(this).__name__} as a table")
            return None
        name = this.name
        db = item.text("db") or None
        catalog = item.text("catalog") or None
        key = item.alias or name
        if alias_node is not None and alias_node.columns:
            self.problem("unsupported", "column aliases on a table")
        if db is None and catalog is None and name in ctes:
            cte = ctes[name]
            scope.deps.append(cte.scope)
            columns = cte.columns
            if columns is None:
                outputs = self.scopes[cte.scope].outputs
                columns = None if outputs is None else tuple(o.name for o in outputs)
            return Source(key, "derived", derived=cte.scope, columns=columns, **common)
        if any(h in name for h in _FILE_HINTS) or (this.quoted and "." in name):
            self.problem("not_read_only", f"file or URL {name!r} read as a table")
            return None
        ref = TableRef(name=name, db=db, catalog=catalog, scope=scope.id, key=key)
        self.tables.append(ref)
        columns = self.schema.get(name.lower())
        if columns is None and db:
            columns = self.schema.get(f"{db}.{name}".lower())
        return Source(key, "table", table=ref, columns=columns, **common)

    def renamed(
        self, item: exp.Expression, outputs: Sequence[Output] | None
    ) -> tuple[str, ...] | None:
        alias = item.args.get("alias")
        if isinstance(alias, exp.TableAlias) and alias.columns:
            return tuple(c.name.lower() for c in alias.columns)
        return None if outputs is None else tuple(o.name for o in outputs)

    # --- columns ------------------------------------------------------------

    def resolve(self, column: exp.Column, scope: _Building) -> ColumnRef:
        """Tie a column to the source it reads, searching outer scopes for correlation."""
        name = column.name.lower()
        qualifier = column.table
        current: _Building | None = scope
        while current is not None:
            if qualifier:
                found = next((s for s in current.sources if s.key == qualifier), None)
                if found is None:
                    found = next(
                        (
                            s
                            for s in current.sources
                            if s.table is not None and s.table.name == qualifier
                        ),
                        None,
                    )
                if found is not None:
                    return ColumnRef(current.id, found.key, name)
            else:
                ref = self.unqualified(name, current)
                if ref is not None:
                    return ref
                if name in current.aliases:
                    return ColumnRef(-1, "#alias", name)
            current = self.scopes[current.outer] if current.outer is not None else None
        return ColumnRef(-1, qualifier or None, name)

    def unqualified(self, name: str, scope: _Building) -> ColumnRef | None:
        known = [s for s in scope.sources if s.columns is not None and name in s.columns]
        unknown = [s for s in scope.sources if s.columns is None]
        if len(known) == 1:
            return ColumnRef(scope.id, known[0].key, name)
        if len(known) > 1:
            if any(name in s.using for s in scope.sources):
                return ColumnRef(scope.id, known[0].key, name)
            return ColumnRef(-1, None, name)
        if len(unknown) == 1:
            return ColumnRef(scope.id, unknown[0].key, name)
        if unknown:
            return ColumnRef(-1, None, name)
        return None

    def star(self, scope: _Building, qualifier: str | None, node: exp.Expression) -> None:
        excluded = {c.name.lower() for c in node.args.get("except_") or []}
        if node.args.get("replace") or node.args.get("rename"):
            self.problem("unsupported", "* REPLACE/RENAME")
        sources = [s for s in scope.sources if qualifier is None or s.key == qualifier]
        for source in sources:
            if source.columns is None:
                scope.stars.append(source.key)
                continue
            for name in source.columns:
                if name not in excluded:
                    scope.reads.append(ColumnRef(scope.id, source.key, name))
        if qualifier is not None and not sources:
            scope.stars.append(qualifier)

    def outputs(self, node: exp.Select, scope: _Building) -> None:
        outputs: list[Output] | None = []
        for index, projection in enumerate(node.expressions):
            inner = unparen(projection.this if isinstance(projection, exp.Alias) else projection)
            star_qualifier: str | None = None
            is_star = isinstance(inner, exp.Star)
            if isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star):
                is_star, star_qualifier = True, inner.table
            if is_star:
                self.star(scope, star_qualifier, inner.this if star_qualifier else inner)
                sources = [
                    s for s in scope.sources if star_qualifier is None or s.key == star_qualifier
                ]
                excluded = {c.name.lower() for c in inner.args.get("except_") or []}
                for source in sources:
                    if source.columns is None or outputs is None:
                        outputs = None
                        continue
                    outputs += [
                        Output(c, ColumnRef(scope.id, source.key, c))
                        for c in source.columns
                        if c not in excluded
                    ]
                continue
            name = (projection.alias_or_name or f"_col{index}").lower()
            ref = self.resolve(inner, scope) if isinstance(inner, exp.Column) else None
            if outputs is not None:
                outputs.append(Output(name, ref))
        scope.outputs = outputs

    def using_fact(self, scope: _Building, position: int, name: str) -> None:
        joined = next((s for s in scope.sources if s.position == position), None)
        if joined is None:
            return
        earlier = [
            s
            for s in scope.sources
            if s.position < position and (s.columns is None or name in s.columns)
        ]
        if len(earlier) != 1:
            return
        scope.facts.append(
            Fact(
                Origin("on", position),
                "eq",
                column=ColumnRef(scope.id, earlier[0].key, name),
                other=ColumnRef(scope.id, joined.key, name),
            )
        )
        for source in (earlier[0], joined):
            scope.reads.append(ColumnRef(scope.id, source.key, name))

    def expressions(
        self,
        node: exp.Expr,
        scope: _Building,
        ctes: Mapping[str, _Cte],
        *,
        aliases_first: bool = False,
    ) -> None:
        """Record column reads and walk subqueries inside one expression.

        ``aliases_first``: a bare name refers to an output alias before a
        source column (ORDER BY semantics).
        """
        stack = [node]
        while stack:
            current = stack.pop()
            if isinstance(current, _QUERY):
                scope.children.append(self.query(current, scope.id, ctes))
                continue
            if (
                aliases_first
                and isinstance(current, exp.Column)
                and not current.table
                and current.name.lower() in scope.aliases
            ):
                continue
            if isinstance(current, exp.Column):
                if isinstance(current.this, exp.Star):
                    self.star(scope, current.table or None, current.this)
                    continue
                ref = self.resolve(current, scope)
                if not ref.resolved and not current.table:
                    row = next((s for s in scope.sources if s.key == current.name), None)
                    if row is not None and (row.columns is None or current.name not in row.columns):
                        scope.stars.append(row.key)
                scope.reads.append(ref)
                continue
            if isinstance(current, exp.Star) and not isinstance(current.parent, exp.Count):
                if not isinstance(current.parent, (exp.Select, exp.Column)):
                    self.star(scope, None, current)
                continue
            stack.extend(current.iter_expressions(reverse=True))

    # --- predicates -----------------------------------------------------------

    def predicate(
        self,
        scope: _Building,
        node: exp.Expression | None,
        origin: Origin,
        ctes: Mapping[str, _Cte],
    ) -> None:
        if node is None:
            return
        self.expressions(node, scope, ctes)
        for conjunct in conjuncts(node):
            fact = self.fact(conjunct, scope, origin)
            scope.facts.append(fact)
            self.tautologies(conjunct, scope, origin, in_or=False, top=True)
            self.column_uses(conjunct, scope, origin, credited=fact.kind == "in")

    def fact(self, node: exp.Expression, scope: _Building, origin: Origin) -> Fact:
        if isinstance(node, exp.Or):
            column: ColumnRef | None = None
            values: list[LiteralValue] = []
            for branch in _or_branches(node):
                single = self.fact(branch, scope, origin)
                if single.kind != "in" or (column is not None and single.column != column):
                    return Fact(origin, "other")
                column = single.column
                values += single.values
            return Fact(origin, "in", column=column, values=tuple(dict.fromkeys(values)))
        if isinstance(node, exp.EQ):
            left, right = unparen(node.this), unparen(node.expression)
            if isinstance(right, exp.Column) and not isinstance(left, exp.Column):
                left, right = right, left
            if isinstance(left, exp.Column) and not isinstance(left.this, exp.Star):
                ref = self.resolve(left, scope)
                if isinstance(right, exp.Column):
                    other = self.resolve(right, scope)
                    if other != ref:
                        return Fact(origin, "eq", column=ref, other=other)
                    return Fact(origin, "other")
                value = literal_value(right)
                if value is not None:
                    return Fact(origin, "in", column=ref, values=(value,))
            return Fact(origin, "other")
        if isinstance(node, exp.In) and not node.args.get("query") and not node.args.get("unnest"):
            target = unparen(node.this)
            if isinstance(target, exp.Column) and node.expressions:
                items = [unparen(e) for e in node.expressions]
                if all(isinstance(i, exp.Null) for i in items):
                    return Fact(origin, "other")
                found = [literal_value(i) for i in items if not isinstance(i, exp.Null)]
                clean = tuple(dict.fromkeys(v for v in found if v is not None))
                if None not in found:
                    ref = self.resolve(target, scope)
                    return Fact(origin, "in", column=ref, values=clean)
        return Fact(origin, "other")

    def tautologies(
        self, node: exp.Expression, scope: _Building, origin: Origin, *, in_or: bool, top: bool
    ) -> None:
        node = unparen(node)
        if isinstance(node, (exp.And, exp.Or)):
            branch_or = in_or or isinstance(node, exp.Or)
            for part in (node.this, node.expression):
                self.tautologies(part, scope, origin, in_or=branch_or, top=False)
            return
        if isinstance(node, exp.Not):
            if truth(node) is True:
                scope.tautologies.append(
                    Tautology(origin, node.sql(), in_or=in_or, on_column=False)
                )
            return
        if truth(node) is True:
            on_column = bool(node.find(exp.Column))
            scope.tautologies.append(
                Tautology(origin, node.sql(), in_or=in_or, on_column=on_column)
            )

    def column_uses(
        self, conjunct: exp.Expression, scope: _Building, origin: Origin, *, credited: bool
    ) -> None:
        stack: list[exp.Expression] = [conjunct]
        while stack:
            current = stack.pop()
            if isinstance(current, _QUERY):
                continue
            if isinstance(current, exp.Column) and not isinstance(current.this, exp.Star):
                kind = self.use_kind(current, conjunct, credited)
                ref = self.resolve(current, scope)
                scope.uses.append(ColumnUse(ref, origin, kind))
                continue
            stack.extend(current.iter_expressions())

    @staticmethod
    def use_kind(column: exp.Column, conjunct: exp.Expression, credited: bool) -> UseKind:
        path: list[exp.Expr] = []
        node: exp.Expr | None = column.parent
        while node is not None and node is not conjunct.parent:
            if not isinstance(node, exp.Paren):
                path.append(node)
            if node is conjunct:
                break
            node = node.parent
        if any(isinstance(p, exp.Or) for p in path):
            return "or"
        if credited:
            return "filter"
        if any(isinstance(p, exp.Not) for p in path):
            return "negated"
        parent = path[0] if path else conjunct
        at_root = parent is unparen(conjunct)
        if isinstance(parent, exp.EQ) and at_root:
            other = parent.expression if unparen(parent.this) is column else parent.this
            return "join_key" if isinstance(unparen(other), exp.Column) else "fuzzy"
        if isinstance(parent, exp.In) and at_root and unparen(parent.this) is column:
            return "subquery" if parent.args.get("query") else "fuzzy"
        if isinstance(parent, _RANGE):
            other = parent.expression if unparen(parent.this) is column else parent.this
            return "non_equi" if isinstance(unparen(other), exp.Column) else "fuzzy"
        if isinstance(parent, exp.Is):
            return "null_check"
        return "fuzzy"


def _schema(schema: Mapping[str, Sequence[str]] | None) -> dict[str, tuple[str, ...]]:
    if not schema:
        return {}
    return {k.lower(): tuple(c.lower() for c in v) for k, v in schema.items()}


def _describe_parse_error(exc: Exception) -> str:
    if isinstance(exc, ParseError) and exc.errors:
        first = exc.errors[0]
        line, col = first.get("line"), first.get("col")
        where = f"第 {line} 行第 {col} 列 / line {line}, column {col}: " if line else ""
        return where + str(first.get("description") or exc).split("\n")[0]
    return str(exc).split("\n")[0]


def parse(sql: str, dialect: str) -> list[exp.Expression]:
    """Parse SQL into its non-empty statements (raises sqlglot errors)."""
    return [cast("exp.Expression", s) for s in sqlglot.parse(sql, read=dialect) if s is not None]


def analyze(
    sql: str,
    dialect: str = "duckdb",
    *,
    schema: Mapping[str, Sequence[str]] | None = None,
    tree: exp.Expression | None = None,
) -> Analysis:
    """Analyze one SQL text (``dialect`` is a sqlglot dialect name).

    ``schema`` maps table names (bare or ``db.table``, any case) to their
    columns; it lets ``*`` expand and unqualified columns resolve. ``tree``
    skips parsing when the caller already holds the parsed statement.
    """
    if tree is None:
        try:
            statements = parse(sql, dialect)
        except (ParseError, TokenError) as exc:
            return Analysis(sql=sql, dialect=dialect, parse_error=_describe_parse_error(exc))
        if len(statements) != 1:
            kinds = ", ".join(type(s).__name__ for s in statements)
            return Analysis(
                sql=sql, dialect=dialect, statements=len(statements), statement_kind=kinds
            )
        tree = statements[0]
    tree = normalize_identifiers(tree, dialect=dialect)
    walker = _Walker(_schema(schema))
    kind = type(tree).__name__
    node_types: set[str] = set()
    functions: list[FunctionUse] = []
    for node in tree.walk():
        node_types.add(type(node).__name__)
        if isinstance(node, exp.Anonymous):
            functions.append(FunctionUse(str(node.this).lower(), known=False))
    if isinstance(unparen(tree), (*_QUERY, exp.Subquery)):
        walker.query(tree, None, {})
    elif isinstance(tree, exp.Pivot):
        walker.problem("unsupported", "PIVOT")
    else:
        walker.problem("not_read_only", kind)
    return Analysis(
        sql=sql,
        dialect=dialect,
        statements=1,
        statement_kind=kind,
        scopes=tuple(s.freeze() for s in walker.scopes),
        tables=tuple(walker.tables),
        functions=tuple(functions),
        node_types=frozenset(node_types),
        problems=tuple(walker.problems),
        tree=tree,
        selects=tuple(walker.selects),
    )
