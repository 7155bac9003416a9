"""The decision: analysis records + permissions → allowed or denied, and why.

Rules run in a fixed order and the first family that fails decides the code:
parse → one statement → read-only → understood syntax (whitelist) → table
fence → column deny lists → row-level isolation. Every reason is written for
both the analyst and the model (中文 / English): what was denied, why, and
what is allowed instead.

Row-level isolation is a proof, not a pattern match. For each scope the rules
compute, from the scope's conjuncts, which columns of which sources are
provably limited to a set of literal values (``game_id IN (1001)``), carrying
limits across ``a.game_id = b.game_id`` equalities and out of CTEs and
derived tables through their output columns. A conjunct counts for the rows
it provably holds for: WHERE and INNER JOIN ON for every row, a LEFT JOIN ON
only for the joined table, a RIGHT JOIN ON only for the tables before it, a
FULL JOIN ON for none; HAVING and QUALIFY never. A sensitive table passes
when its filter column is limited to a subset of the allowed games in the
scope that reads it; anything else is denied, and the denial names the
likeliest reason (a tautology, an OR, a fuzzy comparison, a forbidden game,
or no filter at all).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from dataseer.sql.guard.analysis import (
    Analysis,
    ColumnRef,
    Fact,
    LiteralValue,
    Scope,
    Source,
    TableRef,
)
from dataseer.sql.guard.permissions import BASE_FILTER_COLUMN, Permissions


class DecisionCode(StrEnum):
    """Stable outcome codes of a guard check (tests and callers rely on them)."""

    OK = "OK"
    FORBIDDEN_TABLE = "FORBIDDEN_TABLE"
    FORBIDDEN_COLUMN = "FORBIDDEN_COLUMN"
    MISSING_ROW_FILTER = "MISSING_ROW_FILTER"
    TAUTOLOGY = "TAUTOLOGY"
    OR_BYPASS = "OR_BYPASS"
    FUZZY_FILTER = "FUZZY_FILTER"
    NOT_READ_ONLY = "NOT_READ_ONLY"
    MULTIPLE_STATEMENTS = "MULTIPLE_STATEMENTS"
    UNSUPPORTED_SYNTAX = "UNSUPPORTED_SYNTAX"
    PARSE_ERROR = "PARSE_ERROR"


@dataclass(frozen=True)
class Decision:
    """The guard's answer for one SQL text.

    Attributes:
        allowed: whether the query may run (``rewritten_sql`` when set).
        code: why, as a stable code.
        reason: what was decided and what the user may do, 中文 / English.
        tables: physical tables the query reads, qualified as written.
        rewritten_sql: in enforce mode, the SQL with game filters added.
        scope: what the user may access (``Permissions.describe()``).
    """

    allowed: bool
    code: DecisionCode
    reason: str
    tables: tuple[str, ...]
    rewritten_sql: str | None
    scope: str


@dataclass(frozen=True)
class RowProblem:
    """A sensitive table read without a provable game filter.

    ``fixable`` is true when nothing but the filter is missing, so enforce
    mode may add it.
    """

    table: TableRef
    source: Source
    column: str
    code: DecisionCode
    detail: str
    fixable: bool


ROW_PRECEDENCE = (
    DecisionCode.TAUTOLOGY,
    DecisionCode.OR_BYPASS,
    DecisionCode.UNSUPPORTED_SYNTAX,
    DecisionCode.FUZZY_FILTER,
    DecisionCode.MISSING_ROW_FILTER,
)

DEFAULT_SCHEMAS = frozenset({"main", "public", "default", "dbo"})
"""Schemas a table pattern without a dot applies to."""

ALLOWED_NODES = frozenset(
    {
        "Select",
        "Union",
        "Intersect",
        "Except",
        "Subquery",
        "From",
        "Join",
        "Table",
        "TableAlias",
        "Identifier",
        "Column",
        "Alias",
        "Star",
        "Where",
        "Group",
        "Having",
        "Qualify",
        "Order",
        "Ordered",
        "Limit",
        "Offset",
        "Fetch",
        "With",
        "CTE",
        "Paren",
        "Literal",
        "Boolean",
        "Null",
        "And",
        "Or",
        "Not",
        "Xor",
        "EQ",
        "NEQ",
        "GT",
        "GTE",
        "LT",
        "LTE",
        "NullSafeEQ",
        "NullSafeNEQ",
        "In",
        "Between",
        "Like",
        "ILike",
        "Is",
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Mod",
        "IntDiv",
        "Neg",
        "Case",
        "If",
        "Window",
        "WindowSpec",
        "Filter",
        "Cast",
        "TryCast",
        "DataType",
        "DataTypeParam",
        "Interval",
        "Var",
        "Distinct",
        "Tuple",
        "Array",
        "Values",
        "Lateral",
        "Unnest",
        "Exists",
        "Bracket",
        "DPipe",
        "RegexpLike",
        "RegexpILike",
        "SimilarTo",
        "Glob",
        "Escape",
        "Any",
        "All",
        "Cube",
        "Rollup",
        "GroupingSets",
        "Explode",
        "Posexplode",
        "Inline",
        "GenerateSeries",
        "GenerateDateArray",
        "Semicolon",
        "IgnoreNulls",
        "RespectNulls",
        "WithinGroup",
        "Placeholder",
        "Dot",
        "PropertyEQ",
        "Struct",
        "Collate",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "BitwiseNot",
        "BitwiseLeftShift",
        "BitwiseRightShift",
        "TimeUnit",
        "Anonymous",
        "Distance",
        "JSONExtract",
        "JSONExtractScalar",
        "ColumnDef",
    }
)
"""Node types the guard fully understands; anything else is UNSUPPORTED_SYNTAX."""

ALLOWED_FUNCTIONS = frozenset(
    {
        # aggregates
        "Sum",
        "Count",
        "Avg",
        "Min",
        "Max",
        "CountIf",
        "SumIf",
        "AnyValue",
        "ApproxDistinct",
        "ApproxQuantile",
        "Median",
        "Quantile",
        "PercentileCont",
        "PercentileDisc",
        "Stddev",
        "StddevPop",
        "StddevSamp",
        "Variance",
        "VariancePop",
        "Corr",
        "CovarPop",
        "CovarSamp",
        "ArrayAgg",
        "GroupConcat",
        "StringAgg",
        "ArgMax",
        "ArgMin",
        "LogicalOr",
        "LogicalAnd",
        "BoolOr",
        "BoolAnd",
        "First",
        "Last",
        "Mode",
        "ApproxTopK",
        "ArrayUniqueAgg",
        "CountDistinct",
        # windows
        "Lag",
        "Lead",
        "FirstValue",
        "LastValue",
        "NthValue",
        "RowNumber",
        "Rank",
        "DenseRank",
        "PercentRank",
        "CumeDist",
        "Ntile",
        # conditional and null handling
        "Coalesce",
        "Nullif",
        "If",
        "Greatest",
        "Least",
        "Case",
        # math
        "Round",
        "Abs",
        "Ceil",
        "Floor",
        "Ln",
        "Log",
        "Log2",
        "Log10",
        "Exp",
        "Pow",
        "Sqrt",
        "Sign",
        "SafeDivide",
        "Cbrt",
        "Trunc",
        "Rand",
        # text
        "Lower",
        "Upper",
        "Length",
        "Substring",
        "Trim",
        "Replace",
        "Concat",
        "ConcatWs",
        "Split",
        "SplitPart",
        "StrPosition",
        "Left",
        "Right",
        "Lpad",
        "Rpad",
        "Pad",
        "Initcap",
        "Reverse",
        "Repeat",
        "RegexpExtract",
        "RegexpReplace",
        "RegexpSplit",
        "MD5",
        "MD5Digest",
        "SHA",
        "SHA2",
        "ToChar",
        "StartsWith",
        "EndsWith",
        "Contains",
        "Format",
        "Chr",
        "Ascii",
        "Unicode",
        "Levenshtein",
        "ArrayToString",
        # dates and times
        "DateTrunc",
        "TimestampTrunc",
        "DatetimeTrunc",
        "TimeTrunc",
        "DateAdd",
        "DateSub",
        "DateDiff",
        "DatetimeAdd",
        "DatetimeSub",
        "DatetimeDiff",
        "TimestampAdd",
        "TimestampSub",
        "TimestampDiff",
        "TsOrDsAdd",
        "TsOrDsDiff",
        "TsOrDsToDate",
        "TsOrDsToTimestamp",
        "TsOrDiToDi",
        "Extract",
        "StrToDate",
        "StrToTime",
        "TimeToStr",
        "TimeStrToTime",
        "TimeStrToDate",
        "TimeStrToUnix",
        "DateStrToDate",
        "DateToDateStr",
        "UnixToTime",
        "UnixToStr",
        "UnixToTimeStr",
        "TimeToUnix",
        "StrToUnix",
        "CurrentDate",
        "CurrentTimestamp",
        "CurrentDatetime",
        "CurrentTime",
        "Date",
        "DateFromParts",
        "Datetime",
        "Timestamp",
        "TimestampFromParts",
        "Day",
        "DayOfWeek",
        "DayOfWeekIso",
        "DayOfMonth",
        "DayOfYear",
        "Week",
        "WeekOfYear",
        "Month",
        "Quarter",
        "Year",
        "LastDay",
        "MonthsBetween",
        "AddMonths",
        "DateFormat",
        "ToDays",
        "NextDay",
        "DiToDate",
        "DateToDi",
        "ToNumber",
        "ToDouble",
        "FromISO8601Timestamp",
        "UnixDate",
        "UnixSeconds",
        "GenerateDateArray",
        "Hour",
        "Minute",
        "Second",
        # types and collections
        "Cast",
        "TryCast",
        "ArraySize",
        "ArrayContains",
        "ArrayFilter",
        "Array",
        "ArraySort",
        "ArrayConcat",
        "Struct",
        "StructExtract",
        "Explode",
        "Posexplode",
        "Inline",
        "Unnest",
        "GenerateSeries",
        "JSONExtract",
        "JSONExtractScalar",
        "ParseJSON",
        "Hex",
        "Unhex",
        "ToBase64",
        "FromBase64",
        "Encode",
        "Decode",
    }
)
"""Function classes analysts use that read nothing but their arguments."""

ALLOWED_ANONYMOUS = frozenset(
    {
        "date_part",
        "datepart",
        "datediff",
        "date_diff",
        "dateadd",
        "date_add",
        "date_sub",
        "strftime",
        "strptime",
        "ifnull",
        "nvl",
        "nvl2",
        "isnull",
        "to_date",
        "to_char",
        "date_format",
        "from_unixtime",
        "unix_timestamp",
        "todate",
        "tostartofmonth",
        "tostartofweek",
        "tostartofday",
        "toyyyymm",
        "toyyyymmdd",
        "formatdatetime",
        "uniq",
        "uniqexact",
        "countif",
        "sumif",
        "avgif",
        "round_half_even",
        "weekofyear",
        "dayofweek",
        "dayofmonth",
        "dayofyear",
        "yearweek",
        "last_day",
        "add_months",
        "datetrunc",
        "date_trunc",
        "monthname",
        "dayname",
        "epoch",
        "epoch_ms",
        "isodow",
        "isoyear",
        "yearofweek",
        "to_timestamp",
        "make_date",
        "make_timestamp",
        "age",
        "greatest",
        "least",
        "decode",
        "nullifzero",
        "zeroifnull",
        "div0",
        "safe_divide",
        "list_aggregate",
        "approx_count_distinct",
        "median",
        "mode",
        "bool_or",
        "bool_and",
        "string_agg",
        "listagg",
        "wm_concat",
        "concat_ws",
        "split_part",
        "regexp_substr",
        "regexp_count",
        "instr",
        "locate",
        "position",
        "char_length",
        "character_length",
        "ltrim",
        "rtrim",
        "btrim",
        "substr",
        "mid",
        "len",
        "ucase",
        "lcase",
        "datetime",
        "getdate",
        "sysdate",
        "now",
        "today",
        "yesterday",
        "weekday",
        "str_to_date",
        "quarter",
        "trunc",
        "ceiling",
        "power",
        "mod",
        "log10",
        "log2",
        "ln",
        "truncate",
        "format",
        "printf",
        "lpad",
        "rpad",
        "hash",
        "crc32",
        "percentile",
        "percentile_approx",
        "collect_list",
        "collect_set",
        "size",
        "array_size",
        "sort_array",
        "array_contains",
        "if",
        "iff",
        "coalesce",
        "to_json",
        "json_extract",
        "get_json_object",
        "datetime_trunc",
        "timestamp_trunc",
        "date_from_parts",
        "count_if",
        "sum_if",
        "arraystringconcat",
        "tostring",
        "toint32",
        "toint64",
        "tofloat64",
        "todatetime",
        "toyear",
        "tomonth",
        "todayofmonth",
        "todayofweek",
        "tostartofquarter",
        "tostartofyear",
        "tomonday",
        "datename",
        "eomonth",
        "fsum",
    }
)
"""Lower-case names of functions sqlglot does not model but analysts use."""

FILE_OR_SYSTEM_FUNCTIONS = frozenset(
    {
        "pg_read_file",
        "pg_read_binary_file",
        "pg_ls_dir",
        "pg_stat_file",
        "lo_import",
        "lo_export",
        "lo_get",
        "load_file",
        "read_text",
        "read_blob",
        "getenv",
        "current_setting",
        "set_config",
        "pg_sleep",
        "sleep",
        "benchmark",
        "dblink",
        "dblink_exec",
        "sys_exec",
        "sys_eval",
        "pg_terminate_backend",
        "pg_cancel_backend",
        "pg_reload_conf",
        "pg_rotate_logfile",
        "file",
        "url",
        "s3",
        "hdfs",
        "remote",
        "mysql",
        "postgresql",
        "jdbc",
        "odbc",
        "input",
        "executable",
        "query_to_xml",
        "pg_logical_emit_message",
        "txid_current",
        "nextval",
        "setval",
        "install_extension",
        "load_extension",
        "read_csv",
        "read_csv_auto",
        "read_parquet",
        "read_json",
        "read_json_auto",
        "read_ndjson",
        "glob",
        "parquet_scan",
        "sniff_csv",
    }
)
"""Functions that read or write outside the query: NOT_READ_ONLY wherever they appear."""

_FILE_FUNCTION_CLASSES = frozenset({"ReadCSV", "ReadParquet", "ReadJSON", "Glob"})


def _decision(
    allowed: bool,
    code: DecisionCode,
    reason: str,
    analysis: Analysis,
    permissions: Permissions,
) -> Decision:
    return Decision(
        allowed=allowed,
        code=code,
        reason=reason,
        tables=analysis.table_names,
        rewritten_sql=None,
        scope=permissions.describe(),
    )


def deny(code: DecisionCode, reason: str, analysis: Analysis, permissions: Permissions) -> Decision:
    """A denial with the user's scope attached."""
    return _decision(False, code, reason, analysis, permissions)


# --- table fence ---------------------------------------------------------------


def _patterns_match(names: Iterable[str], patterns: Iterable[str]) -> bool:
    lowered = [n.lower() for n in names]
    return any(fnmatch.fnmatchcase(n, p.lower()) for p in patterns for n in lowered)


def table_allowed(table: TableRef, patterns: tuple[str, ...]) -> bool:
    """Whether a physical table is inside the fence described by ``patterns``.

    Dotless patterns apply to tables in a default schema (``main``,
    ``public``, ``default``) without a catalog; dotted ones to the qualified
    name as written (``db.table`` or ``catalog.db.table``).
    """
    bare = [p for p in patterns if "." not in p]
    dotted = [p for p in patterns if "." in p]
    default = table.catalog is None and (table.db is None or table.db.lower() in DEFAULT_SCHEMAS)
    if default and _patterns_match([table.name], bare):
        return True
    names = [table.qualified]
    if table.db:
        names.append(f"{table.db}.{table.name}")
    return _patterns_match(names, dotted)


def _metadata_allowed(table: TableRef, patterns: tuple[str, ...]) -> bool:
    names = [table.name, table.qualified]
    if table.db:
        names.append(f"{table.db}.{table.name}")
    return _patterns_match(names, patterns)


# --- row constraints -------------------------------------------------------------

_Key = tuple[int, str, str]
_ALL = None


def _key(ref: ColumnRef) -> _Key:
    return (ref.scope, ref.source or "", ref.name)


class Constraints:
    """Per-column literal limits, computed scope by scope to a fixpoint."""

    def __init__(self, analysis: Analysis, permissions: Permissions) -> None:
        self.scopes = {s.id: s for s in analysis.scopes}
        self.permissions = permissions
        self.values: dict[_Key, frozenset[LiteralValue]] = {}
        self.outputs: dict[int, list[frozenset[LiteralValue] | None] | None] = {}
        self._done: set[int] = set()
        for scope in analysis.scopes:
            self.evaluate(scope.id)

    def get(self, ref: ColumnRef | None) -> frozenset[LiteralValue] | None:
        """The proven value set of a column, if any."""
        if ref is None or not ref.resolved:
            return None
        return self.values.get(_key(ref))

    def evaluate(self, scope_id: int) -> None:
        """Compute the limits of one scope after the scopes it depends on."""
        if scope_id in self._done:
            return
        self._done.add(scope_id)
        scope = self.scopes[scope_id]
        if scope.kind == "union":
            self._union(scope)
            return
        for dep in scope.deps:
            self.evaluate(dep)
        local: dict[_Key, frozenset[LiteralValue]] = {}
        for source in scope.sources:
            if source.kind != "derived" or source.lateral or source.derived is None:
                continue
            outputs = self.outputs.get(source.derived)
            if outputs is None or source.columns is None:
                continue
            for index, name in enumerate(source.columns):
                if index < len(outputs) and outputs[index] is not None:
                    local[(scope.id, source.key, name)] = outputs[index]  # type: ignore[assignment]
        self._fixpoint(scope, local)
        self.values.update(local)
        if scope.outputs is None:
            self.outputs[scope.id] = None
        else:
            self.outputs[scope.id] = [self.get(o.column) for o in scope.outputs]
        for child in scope.children:
            self.evaluate(child)

    def _union(self, scope: Scope) -> None:
        for branch in scope.branches:
            self.evaluate(branch)
        sides = [self.outputs.get(b) for b in scope.branches]
        if any(side is None for side in sides):
            self.outputs[scope.id] = None
            return
        width = min(len(side or []) for side in sides)
        merged: list[frozenset[LiteralValue] | None] = []
        for index in range(width):
            parts = [(side or [])[index] for side in sides]
            if any(p is None for p in parts):
                merged.append(None)
            else:
                merged.append(frozenset().union(*[p for p in parts if p is not None]))
        self.outputs[scope.id] = merged

    @staticmethod
    def targets(fact: Fact, scope: Scope) -> set[str] | None:
        """Source keys a conjunct provably holds for (``None`` = every source)."""
        origin = fact.origin
        if origin.clause == "where":
            return _ALL
        if origin.clause != "on":
            return set()
        joined = next((s for s in scope.sources if s.position == origin.position), None)
        if joined is None:
            return set()
        if joined.join_side == "left" or joined.join_kind in ("semi", "anti"):
            return {joined.key}
        if joined.join_side == "right":
            return {s.key for s in scope.sources if s.position < origin.position}
        if joined.join_side == "full":
            return set()
        return _ALL

    def _fixpoint(self, scope: Scope, local: dict[_Key, frozenset[LiteralValue]]) -> None:
        def lookup(ref: ColumnRef) -> frozenset[LiteralValue] | None:
            if not ref.resolved:
                return None
            return local.get(_key(ref)) if ref.scope == scope.id else self.values.get(_key(ref))

        def tighten(ref: ColumnRef, values: frozenset[LiteralValue]) -> bool:
            key = _key(ref)
            old = local.get(key)
            new = values if old is None else old & values
            if new != old:
                local[key] = new
                return True
            return False

        def applies(ref: ColumnRef | None, targets: set[str] | None) -> bool:
            return (
                ref is not None
                and ref.resolved
                and ref.scope == scope.id
                and (targets is _ALL or ref.source in targets)
            )

        allowed_ids = self.permissions.allowed_game_ids
        bases = self.permissions.allowed_game_base_ids
        changed = True
        while changed:
            changed = False
            for fact in scope.facts:
                targets = self.targets(fact, scope)
                if fact.kind == "in" and applies(fact.column, targets):
                    assert fact.column is not None
                    changed |= tighten(fact.column, frozenset(fact.values))
                    if (
                        fact.column.name == BASE_FILTER_COLUMN
                        and bases is not None
                        and allowed_ids is not None
                        and set(fact.values) <= set(bases)
                    ):
                        source = scope.source(fact.column.source)
                        if source is not None and source.table is not None:
                            column = self.permissions.filter_column(source.table.name)
                            ref = ColumnRef(scope.id, source.key, column)
                            changed |= tighten(ref, frozenset(allowed_ids))
                elif fact.kind == "eq" and fact.column is not None and fact.other is not None:
                    for a, b in ((fact.column, fact.other), (fact.other, fact.column)):
                        if applies(b, targets):
                            values = lookup(a)
                            if values is not None:
                                changed |= tighten(b, values)


def _fmt_values(values: Iterable[LiteralValue]) -> str:
    return ", ".join(str(v) for v in sorted(values, key=str))


def row_problems(
    analysis: Analysis, permissions: Permissions, constraints: Constraints | None = None
) -> list[RowProblem]:
    """Sensitive tables whose rows are not provably limited to the allowed games."""
    allowed = permissions.allowed_game_ids
    if allowed is None:
        return []
    allowed_set: set[LiteralValue] = set(allowed)
    constraints = constraints or Constraints(analysis, permissions)
    scopes = {s.id: s for s in analysis.scopes}
    uses_by_key: dict[_Key, list[str]] = {}
    for scope in analysis.scopes:
        for use in scope.uses:
            key = _key(use.column) if use.column.resolved else (-1, "", use.column.name)
            uses_by_key.setdefault(key, []).append(use.kind)
    problems: list[RowProblem] = []
    for table in analysis.tables:
        scope = scopes[table.scope]
        source = scope.source(table.key)
        if source is None or table.is_system or not permissions.is_sensitive(table.name):
            continue
        column = permissions.filter_column(table.name)
        if source.columns is not None and column not in source.columns:
            continue
        ref = ColumnRef(scope.id, source.key, column)
        values = constraints.get(ref)
        if values is not None and values <= allowed_set:
            continue
        kinds = uses_by_key.get(_key(ref), []) + uses_by_key.get((-1, "", column), [])
        kinds += uses_by_key.get((scope.id, source.key, BASE_FILTER_COLUMN), [])
        qualifier = f"{source.key}." if source.key else ""
        fix = f"`{qualifier}{column} IN ({_fmt_values(allowed)})`" if allowed else ""
        where = f"`{table.qualified}`" + (
            f"（别名 / alias `{source.key}`）" if source.key != table.name else ""
        )
        taut = [t for t in scope.tautologies if t.in_or or t.on_column]
        if taut:
            code = DecisionCode.TAUTOLOGY
            detail = (
                f"表 {where} 的过滤条件里有恒真式 `{taut[0].text}`，它让过滤失效 / the predicate "
                f"`{taut[0].text}` is always true, so it cannot limit rows of {where}"
            )
        elif "or" in kinds:
            code = DecisionCode.OR_BYPASS
            detail = (
                f"表 {where} 的 `{column}` 条件出现在 OR 分支里，其他分支会放宽过滤；请把 {fix} "
                f"作为独立的 AND 条件 / the `{column}` condition on {where} sits inside an OR, "
                f"whose other branches widen it; add {fix} as its own AND condition"
            )
        elif "non_equi" in kinds:
            code = DecisionCode.UNSUPPORTED_SYNTAX
            detail = (
                f"表 {where} 的 `{column}` 用在非等值连接里，无法证明只读到允许的游戏；请改成等值"
                f"连接并加上 {fix} / `{column}` of {where} is used in a non-equi join, which "
                f"cannot be proved safe; join on equality and add {fix}"
            )
        elif {"fuzzy", "null_check", "negated"} & set(kinds):
            code = DecisionCode.FUZZY_FILTER
            detail = (
                f"表 {where} 的 `{column}` 只能用 `=` 或 `IN (…)` 加字面量过滤，不能用 LIKE、"
                f"范围、函数、CAST、NOT 或 NULL 判断；请改成 {fix} / `{column}` of {where} must "
                f"be filtered with `=` or `IN (...)` and literals, not LIKE, ranges, functions, "
                f"casts, NOT or NULL checks; use {fix}"
            )
        elif values is not None:
            bad = sorted(values - allowed_set, key=str)
            code = DecisionCode.MISSING_ROW_FILTER
            detail = (
                f"表 {where} 查询了无权访问的 {column} {_fmt_values(bad)}；你只能访问 {column} "
                f"{_fmt_values(allowed) or '（无）'} / {where} is filtered to {column} "
                f"{_fmt_values(bad)}, which you may not access; allowed {column}: "
                f"{_fmt_values(allowed) or 'none'}"
            )
            problems.append(RowProblem(table, source, column, code, detail, fixable=False))
            continue
        else:
            code = DecisionCode.MISSING_ROW_FILTER
            detail = (
                f"表 {where} 缺少游戏过滤：请在读取它的那一层查询的 WHERE 中加上 {fix} / {where} "
                f"is read without a game filter: add {fix} to the WHERE of the query level that "
                f"reads it"
            )
            problems.append(RowProblem(table, source, column, code, detail, fixable=bool(allowed)))
            continue
        problems.append(RowProblem(table, source, column, code, detail, fixable=False))
    return problems


# --- the decision ------------------------------------------------------------------


def _function_name(name: str) -> str:
    return name.lower().replace("_", "")


def check_structure(analysis: Analysis, permissions: Permissions) -> Decision | None:
    """Parse, statement count, read-only and whitelist rules; ``None`` when all pass."""
    if analysis.parse_error is not None:
        return deny(
            DecisionCode.PARSE_ERROR,
            f"SQL 无法解析 / SQL could not be parsed: {analysis.parse_error}",
            analysis,
            permissions,
        )
    if analysis.statements != 1:
        count = analysis.statements
        return deny(
            DecisionCode.MULTIPLE_STATEMENTS,
            f"一次只能执行一条查询语句，这里有 {count} 条 / exactly one statement per query, got "
            f"{count}",
            analysis,
            permissions,
        )
    writes = [p.what for p in analysis.problems if p.kind == "not_read_only"]
    writes += [
        f"function {u.name}" for u in analysis.functions if u.name in FILE_OR_SYSTEM_FUNCTIONS
    ]
    writes += [f"function {n}" for n in sorted(analysis.node_types & _FILE_FUNCTION_CLASSES)]
    if writes:
        what = "; ".join(dict.fromkeys(writes))
        return deny(
            DecisionCode.NOT_READ_ONLY,
            f"只允许只读查询（SELECT / WITH / UNION），不允许：{what} / only read-only queries "
            f"(SELECT, WITH, set operations) are allowed, not: {what}",
            analysis,
            permissions,
        )
    unsupported = [p.what for p in analysis.problems if p.kind == "unsupported"]
    unsupported += sorted(
        n for n in analysis.node_types if n not in ALLOWED_NODES and n not in ALLOWED_FUNCTIONS
    )
    unsupported += [
        f"function {u.name}()" for u in analysis.functions if u.name not in ALLOWED_ANONYMOUS
    ]
    if unsupported:
        what = ", ".join(dict.fromkeys(unsupported))
        return deny(
            DecisionCode.UNSUPPORTED_SYNTAX,
            f"查询用到了权限检查无法确认安全的语法：{what}。请用常见的 SELECT、JOIN、聚合、窗口和"
            f"日期函数改写 / the query uses syntax the permission check cannot prove safe: "
            f"{what}. Rewrite it with plain SELECT, JOIN, aggregate, window and date functions",
            analysis,
            permissions,
        )
    return None


def check_tables(analysis: Analysis, permissions: Permissions) -> Decision | None:
    """The table fence (and system catalogs); ``None`` when every table is allowed."""
    for table in analysis.tables:
        if table.is_system:
            if _metadata_allowed(table, permissions.metadata_tables):
                continue
            allowed = ", ".join(permissions.metadata_tables) or "无 / none"
            return deny(
                DecisionCode.FORBIDDEN_TABLE,
                f"无权访问系统表 `{table.qualified}`；可读的元数据表：{allowed}。表结构请用 "
                f"table_info / search_tables 查看 / system table `{table.qualified}` is not "
                f"allowed; metadata tables you may read: {allowed}. Use table_info or "
                f"search_tables for schemas",
                analysis,
                permissions,
            )
        if not table_allowed(table, permissions.allowed_tables):
            allowed = ", ".join(permissions.allowed_tables) or "无 / none"
            return deny(
                DecisionCode.FORBIDDEN_TABLE,
                f"无权访问表 `{table.qualified}`；你可以查询的表：{allowed} / table "
                f"`{table.qualified}` is not allowed; you may query: {allowed}",
                analysis,
                permissions,
            )
    return None


def check_columns(analysis: Analysis, permissions: Permissions) -> Decision | None:
    """Column deny lists, including ``*``; ``None`` when no hidden column is read."""
    if not permissions.denied_columns:
        return None
    scopes = {s.id: s for s in analysis.scopes}
    hidden_anywhere: set[str] = set()
    for table in analysis.tables:
        hidden_anywhere |= permissions.hidden_columns(table.name)

    def deny_column(table: str, column: str) -> Decision:
        return deny(
            DecisionCode.FORBIDDEN_COLUMN,
            f"无权读取 `{table}.{column}`；请去掉该列（SELECT * 也会读到它，请列出需要的列）"
            f" / column `{table}.{column}` is hidden from you; remove it (SELECT * reads it "
            f"too: list the columns you need)",
            analysis,
            permissions,
        )

    for scope in analysis.scopes:
        for ref in scope.reads:
            if not ref.resolved:
                if ref.source != "#alias" and ref.name in hidden_anywhere:
                    return deny_column(ref.source or "?", ref.name)
                continue
            owner = scopes[ref.scope].source(ref.source)
            if (
                owner is not None
                and owner.table is not None
                and ref.name in permissions.hidden_columns(owner.table.name)
            ):
                return deny_column(owner.table.qualified, ref.name)
        for key in scope.stars:
            owner = scope.source(key)
            if owner is not None and owner.table is not None:
                hidden = permissions.hidden_columns(owner.table.name)
                if hidden:
                    return deny_column(owner.table.qualified, sorted(hidden)[0])
    return None


def decide(analysis: Analysis, permissions: Permissions) -> tuple[Decision, list[RowProblem]]:
    """Apply every rule family in order; also return the row problems (for enforce mode)."""
    for rule in (check_structure, check_tables, check_columns):
        decision = rule(analysis, permissions)
        if decision is not None:
            return decision, []
    problems = row_problems(analysis, permissions)
    if problems:
        code = min((p.code for p in problems), key=ROW_PRECEDENCE.index)
        details = list(dict.fromkeys(p.detail for p in problems))
        reason = "\n".join(details[:5])
        if len(details) > 5:
            reason += f"\n（另有 {len(details) - 5} 处 / {len(details) - 5} more）"
        reason += f"\n可查看的游戏 / allowed games: game_id IN ({permissions.games_text()})"
        return deny(code, reason, analysis, permissions), problems
    tables = ", ".join(analysis.table_names) or "无 / none"
    return (
        _decision(
            True,
            DecisionCode.OK,
            f"允许执行，读取的表：{tables} / allowed; tables read: {tables}",
            analysis,
            permissions,
        ),
        [],
    )
